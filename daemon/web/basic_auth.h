// The users of the web configuration's basic_auth_users, checked as exporter-toolkit checks
// them: bcrypt (libcrypt's crypt_r), one user-independent bcrypt per check so that its time
// tells nothing about which user names exist, and successful checks cached briefly because
// bcrypt is slow on purpose (tens of milliseconds at cost 10).
#pragma once

#include <openssl/sha.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

struct crypt_data;

namespace kpath {

class BasicAuthUsers {
 public:
  using Clock = std::function<absl::Time()>;
  static constexpr absl::Duration kCacheTime = absl::Minutes(1);
  static constexpr size_t kCacheEntries = 100;  // as exporter-toolkit's cache

  // `users`: user name -> bcrypt hash; a hash libcrypt cannot use is an error naming the user.
  static absl::StatusOr<std::unique_ptr<BasicAuthUsers>> Create(
      const std::map<std::string, std::string, std::less<>>& users, Clock clock = absl::Now);
  ~BasicAuthUsers();

  // Thread-safe. True if `user` is configured and `password` matches its hash.
  bool Check(std::string_view user, std::string_view password);

  size_t users() const { return users_.size(); }
  // bcrypt computations so far (tests: the cache, one bcrypt per unknown user).
  uint64_t bcrypt_runs() const;

 private:
  using Digest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;
  struct User {
    Digest name_digest;
    std::string hash;
  };
  BasicAuthUsers(std::vector<User> users, std::string dummy_hash, Clock clock);

  Digest Keyed(std::string_view user, std::string_view password) const;
  bool Cached(const Digest& key);
  void Remember(const Digest& key);

  const std::vector<User> users_;
  // Checked for an unknown user: the costliest user's cost, a checksum nothing produces.
  const std::string dummy_hash_;
  const Clock clock_;
  std::array<unsigned char, 32> cache_salt_;  // cache keys are salted digests, not passwords

  // One bcrypt at a time, as exporter-toolkit does: a flood of guesses takes one CPU, not all.
  mutable absl::Mutex bcrypt_mu_;
  std::unique_ptr<crypt_data> crypt_ ABSL_GUARDED_BY(bcrypt_mu_);
  uint64_t bcrypt_runs_ ABSL_GUARDED_BY(bcrypt_mu_) = 0;

  absl::Mutex cache_mu_;
  std::map<Digest, absl::Time> cache_ ABSL_GUARDED_BY(cache_mu_);  // key -> valid until
};

}  // namespace kpath
