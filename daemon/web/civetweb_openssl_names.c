// Stand-ins for the names under which civetweb 1.15 (Debian 12's libcivetweb1) loads OpenSSL at
// run time: it dlopen()s "libssl.so" and "libcrypto.so", which only the libssl-dev package
// provides, and dlsym()s SSL_get_peer_certificate, which OpenSSL 3 no longer exports (it became a
// macro for SSL_get1_peer_certificate): civetweb then calls a null pointer after every TLS
// handshake (civetweb issue #1334). This file is built twice, as libraries whose sonames are
// "libssl.so" (with KPATH_CIVETWEB_LIBSSL: the missing function) and "libcrypto.so" (nothing of
// its own). kpathd loads both before civetweb starts (daemon/web/web_tls.cpp): the dynamic loader
// hands an already loaded library to a dlopen() of its soname, and civetweb's dlsym() on it finds
// every other function in the real libssl.so.3 and libcrypto.so.3 it depends on.
#ifdef KPATH_CIVETWEB_LIBSSL
#include <openssl/ssl.h>

#undef SSL_get_peer_certificate
X509* SSL_get_peer_certificate(const SSL* ssl);
// OpenSSL 1.1's semantics: the caller owns a reference (civetweb frees it).
X509* SSL_get_peer_certificate(const SSL* ssl) { return SSL_get1_peer_certificate(ssl); }
#else
// Only the soname and the dependency on libcrypto.so.3.
typedef int kpath_civetweb_libcrypto_name;
#endif
