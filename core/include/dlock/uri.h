// Lock-service URIs: scheme://[user[:password]@]host[:port][,host[:port]…][/path][?k=v&…]
// Several comma-separated hosts are accepted (zk://h1:2181,h2:2181/chroot), which RFC 3986
// does not allow, so the authority is split by hand before each part is checked.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock {

struct HostPort {
  std::string host;        // percent-decoded; IPv6 without brackets
  std::uint16_t port = 0;  // 0 when the URI gives none
};

struct Uri {
  std::string scheme;  // lower-cased
  std::string user;    // percent-decoded; empty if none
  std::optional<std::string> password;
  std::vector<HostPort> hosts;  // empty for mem:// and file:///dir
  std::string path;             // percent-decoded, with its leading '/'; may be empty
  std::vector<std::pair<std::string, std::string>> params;  // percent-decoded, in order

  // Parses `text`. Throws Error(invalid_argument) naming what is wrong (the message
  // contains the URI redacted, never the password): no scheme, bad port (not 1..65535),
  // bad percent-encoding, empty host between commas, a repeated parameter.
  static Uri parse(std::string_view text);

  // The URI printed back with the password and every secret parameter's value (see
  // is_secret_param) replaced by "***". Use it, or redact_uri, wherever a URI is printed.
  // Each part is percent-encoded again: without a password or secret parameter,
  // parse(redacted()) gives back this Uri (the path's segments joined by '/').
  std::string redacted() const;
};

// Redacts a URI that may not even parse, for error messages: the userinfo password (taken
// to end at the text's last '@', so an unencoded '@', '/', '?' or '#' in it is covered) and
// the values of secret parameters become "***". It may mask more than the password (an '@'
// in a path or query), never less.
std::string redact_uri(std::string_view text);

// True if a query parameter named `key` may hold a secret, so its value is never printed:
// the name (percent-decoded, any case) contains pass, pwd, secret, token, auth or cred.
bool is_secret_param(std::string_view key);

// `text` percent-encoded: every byte but the unreserved ones (RFC 3986: A-Z a-z 0-9 - . _ ~,
// whatever the locale) and those in `keep`. For building URIs that parse back to `text`.
std::string percent_encode(std::string_view text, std::string_view keep = {});

// Reads a Uri's query parameters with checks, for a backend's factory. Every getter removes
// the key it read; finish() throws Error(invalid_argument) naming any key left unread, so an
// unknown parameter is an error rather than silently ignored. Its errors never show the value
// of a parameter not read yet.
class UriParams {
 public:
  explicit UriParams(const Uri& uri);
  std::optional<std::string> take_string(std::string_view key);
  // "250ms", "5s", "2m" … (see parse_duration); must be > 0.
  std::optional<std::chrono::milliseconds> take_duration(std::string_view key);
  // true/false/1/0/yes/no/on/off.
  std::optional<bool> take_bool(std::string_view key);
  // Decimal in [min, max].
  std::optional<std::uint64_t> take_uint(std::string_view key, std::uint64_t min, std::uint64_t max);
  void finish() const;
  // The URI as Uri::redacted() prints it, but with the value of every parameter not read
  // yet shown as "***": a parameter nobody reads may be a password under a name
  // is_secret_param does not catch (pw=). Print this, not Uri::redacted(), in errors about
  // a URI that is still being checked; finish() names unknown parameters, never their values.
  std::string redacted() const;

 private:
  Uri uri_;
  std::vector<std::pair<std::string, std::string>> left_;
};

}  // namespace dlock
