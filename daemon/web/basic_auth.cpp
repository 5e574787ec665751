#include "daemon/web/basic_auth.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "absl/strings/str_cat.h"

namespace kpath {
namespace {

using Digest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

Digest Sha256(std::initializer_list<std::string_view> parts) {
  Digest digest{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  for (std::string_view part : parts) EVP_DigestUpdate(ctx, part.data(), part.size());
  EVP_DigestFinal_ex(ctx, digest.data(), nullptr);
  EVP_MD_CTX_free(ctx);
  return digest;
}

std::string_view AsText(const unsigned char* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace

absl::StatusOr<std::unique_ptr<BasicAuthUsers>> BasicAuthUsers::Create(
    const std::map<std::string, std::string, std::less<>>& users, Clock clock) {
  std::vector<User> list;
  std::string costliest;
  for (const auto& [name, hash] : users) {
    const int verdict = crypt_checksalt(hash.c_str());
    if (verdict != CRYPT_SALT_OK && verdict != CRYPT_SALT_METHOD_LEGACY) {
      return absl::InvalidArgumentError(
          absl::StrCat("basic_auth_users.", name,
                       ": libcrypt cannot check this hash (crypt_checksalt ", verdict, ")"));
    }
    // "$2y$NN$": the cost is the two digits.
    if (costliest.empty() || hash.compare(4, 2, costliest, 4, 2) > 0) costliest = hash;
    list.push_back({Sha256({name}), hash});
  }
  std::string dummy;
  if (!costliest.empty()) dummy = costliest.substr(0, 29) + std::string(31, '.');
  return std::unique_ptr<BasicAuthUsers>(
      new BasicAuthUsers(std::move(list), std::move(dummy), std::move(clock)));
}

BasicAuthUsers::BasicAuthUsers(std::vector<User> users, std::string dummy_hash, Clock clock)
    : users_(std::move(users)),
      dummy_hash_(std::move(dummy_hash)),
      clock_(std::move(clock)),
      crypt_(std::make_unique<crypt_data>()) {
  RAND_bytes(cache_salt_.data(), static_cast<int>(cache_salt_.size()));
}

BasicAuthUsers::~BasicAuthUsers() = default;

uint64_t BasicAuthUsers::bcrypt_runs() const {
  absl::MutexLock lock(&bcrypt_mu_);
  return bcrypt_runs_;
}

BasicAuthUsers::Digest BasicAuthUsers::Keyed(std::string_view user,
                                             std::string_view password) const {
  const std::string user_length = absl::StrCat(user.size(), ":");
  return Sha256({AsText(cache_salt_.data(), cache_salt_.size()), user_length, user, password});
}

bool BasicAuthUsers::Cached(const Digest& key) {
  absl::MutexLock lock(&cache_mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return false;
  if (clock_() < it->second) return true;
  cache_.erase(it);
  return false;
}

void BasicAuthUsers::Remember(const Digest& key) {
  absl::MutexLock lock(&cache_mu_);
  const absl::Time now = clock_();
  if (cache_.size() >= kCacheEntries) {
    for (auto it = cache_.begin(); it != cache_.end();) {
      it = it->second <= now ? cache_.erase(it) : std::next(it);
    }
  }
  if (cache_.size() >= kCacheEntries) {
    auto oldest = cache_.begin();
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->second < oldest->second) oldest = it;
    }
    cache_.erase(oldest);
  }
  cache_[key] = now + kCacheTime;
}

bool BasicAuthUsers::Check(std::string_view user, std::string_view password) {
  if (users_.empty()) return false;
  const Digest key = Keyed(user, password);
  if (Cached(key)) return true;

  // Every configured name is compared, in constant time, whichever matches.
  const Digest name = Sha256({user});
  size_t match = users_.size();
  for (size_t i = 0; i < users_.size(); ++i) {
    const size_t equal =
        CRYPTO_memcmp(name.data(), users_[i].name_digest.data(), name.size()) == 0 ? 1 : 0;
    match = equal * i + (1 - equal) * match;
  }
  const bool known = match < users_.size();
  const std::string& hash = known ? users_[match].hash : dummy_hash_;

  absl::MutexLock lock(&bcrypt_mu_);
  if (Cached(key)) return true;  // checked by another scrape while this one waited
  ++bcrypt_runs_;
  std::string phrase(password);
  const char* computed = crypt_r(phrase.c_str(), hash.c_str(), crypt_.get());
  OPENSSL_cleanse(phrase.data(), phrase.size());
  const bool matches = computed != nullptr && std::strlen(computed) == hash.size() &&
                       CRYPTO_memcmp(computed, hash.data(), hash.size()) == 0;
  if (!known || !matches) return false;
  Remember(key);
  return true;
}

}  // namespace kpath
