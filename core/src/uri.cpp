// Uri parsing on uriparser. The authority may list several comma-separated hosts, which
// RFC 3986 does not allow: it is split by hand and each host checked on its own.
#include "dlock/uri.h"

#include <arpa/inet.h>
#include <uriparser/Uri.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "dlock/duration.h"
#include "dlock/error.h"

namespace dlock {
namespace {

std::string redact(std::string_view text, bool every_value);

// A URI that does not parse: no parameter is known yet, so no parameter's value is shown
// (one may be a password under a name is_secret_param does not catch, such as pw).
[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw Error(ErrorCode::invalid_argument, "bad URI '" + redact(text, true) + "': " + why);
}

std::string range(const UriTextRangeA& r) {
  return r.first == nullptr ? std::string() : std::string(r.first, r.afterLast);
}

std::string decode(std::string s, std::string_view text) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
                        !std::isxdigit(static_cast<unsigned char>(s[i + 2])))) {
      bad(text, "bad percent-encoding");
    }
  }
  s.push_back('\0');
  const char* end = uriUnescapeInPlaceA(s.data());
  s.resize(static_cast<std::size_t>(end - s.data()));
  return s;
}

struct ParsedUri {
  UriUriA uri{};
  bool ok = false;
  ~ParsedUri() {
    if (ok) uriFreeUriMembersA(&uri);
  }
};

std::uint16_t parse_port(const std::string& port, std::string_view text) {
  if (port.empty()) return 0;
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) {
    bad(text, "bad port '" + port + "' (want 1..65535)");
  }
  int p = std::stoi(port);
  if (p < 1 || p > 65535) bad(text, "bad port '" + port + "' (want 1..65535)");
  return static_cast<std::uint16_t>(p);
}

// The port of "host:port" or "[v6]:port", if any, must be digits.
void check_port_text(std::string_view host, std::string_view text) {
  std::size_t colon = host.rfind(':');
  if (colon == std::string_view::npos) return;
  if (host.front() == '[' && host.rfind(']') > colon) return;  // a colon inside [v6]
  if (host.front() != '[' && host.find(':') != colon) return;  // bare IPv6: uriparser's call
  std::string port(host.substr(colon + 1));
  if (!port.empty() && !std::all_of(port.begin(), port.end(), ::isdigit)) {
    bad(text, "bad port '" + port + "' (want 1..65535)");
  }
}

HostPort parse_host(std::string_view host, std::string_view text) {
  check_port_text(host, text);
  if (host.empty()) bad(text, "empty host in the host list");
  std::string probe = "x://" + std::string(host);
  ParsedUri p;
  const char* err = nullptr;
  if (uriParseSingleUriA(&p.uri, probe.c_str(), &err) != URI_SUCCESS) {
    p.ok = false;
    bad(text, "bad host '" + std::string(host) + "'");
  }
  p.ok = true;
  if (p.uri.userInfo.first || p.uri.pathHead || p.uri.query.first) {
    bad(text, "bad host '" + std::string(host) + "'");
  }
  return HostPort{decode(range(p.uri.hostText), text), parse_port(range(p.uri.portText), text)};
}

}  // namespace

namespace {
// A parameter's value as an error message may quote it.
std::string shown(std::string_view key, const std::string& value) {
  return is_secret_param(key) ? "***" : value;
}
}  // namespace

bool is_secret_param(std::string_view key) {
  std::string k;
  for (std::size_t i = 0; i < key.size(); ++i) {  // decoded, so "pass%77ord" is caught too
    if (key[i] == '%' && i + 2 < key.size() && std::isxdigit(static_cast<unsigned char>(key[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(key[i + 2]))) {
      k += static_cast<char>(std::stoi(std::string(key.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      k += key[i];
    }
  }
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view word : {"pass", "pwd", "secret", "token", "auth", "cred"}) {
    if (k.find(word) != std::string::npos) return true;
  }
  return false;
}

// Works on text that may not parse, so it over-masks rather than guess: the password runs
// from the first ':' after "scheme://" to the LAST '@' of the whole text, because a password
// may hold an unencoded '@', '/', '?' or '#' (a URI with an '@' in its path or query loses
// that part of the printout, never a secret). Then every secret-looking query value.
std::string redact_uri(std::string_view text) { return redact(text, false); }

namespace {
// redact_uri; with `every_value`, the value of every query parameter is masked, not only
// the secret ones.
std::string redact(std::string_view text, bool every_value) {
  std::string s(text);
  std::size_t start = s.find("://");
  start = start == std::string::npos ? 0 : start + 3;
  std::size_t rest = start;  // where the query search starts: after the masked userinfo
  std::size_t at = s.rfind('@');
  if (at != std::string::npos && at >= start) {
    std::size_t colon = s.find(':', start);
    if (start == 0) {
      s = "***" + s.substr(at);  // no scheme: cannot tell user from password
      rest = 3;
    } else if (colon < at) {
      s = s.substr(0, colon + 1) + "***" + s.substr(at);
      rest = colon + 4;
    } else {
      rest = at;
    }
  }
  std::size_t q = s.find('?', rest);
  if (q == std::string::npos) return s;
  std::string out = s.substr(0, q + 1);
  std::size_t pos = q + 1;
  while (true) {
    std::size_t amp = s.find('&', pos);
    std::string item = s.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    std::size_t eq = item.find('=');
    if (eq != std::string::npos && (every_value || is_secret_param(std::string_view(item).substr(0, eq)))) {
      item = item.substr(0, eq + 1) + "***";
    }
    out += item;
    if (amp == std::string::npos) break;
    out += '&';
    pos = amp + 1;
  }
  return out;
}
}  // namespace

Uri Uri::parse(std::string_view text) {
  std::string s(text);
  if (s.find('\0') != std::string::npos) bad(text, "contains a NUL byte");
  // Decoded, a NUL would cut a value short where a client library takes C strings ("a%00b"
  // read as "a": two prefixes one namespace, a password checked by its first part).
  if (s.find("%00") != std::string::npos) bad(text, "contains a percent-encoded NUL (%00)");
  std::size_t sep = s.find("://");
  if (sep == std::string::npos || sep == 0) bad(text, "no scheme (want scheme://…)");

  // Split a multi-host authority by hand; uriparser then sees only the first host.
  std::size_t auth_begin = sep + 3;
  std::size_t auth_end = s.find_first_of("/?#", auth_begin);
  if (auth_end == std::string::npos) auth_end = s.size();
  std::size_t at = s.rfind('@', auth_end);
  // "u:pw/x@h": a password with an unencoded '/', '?' or '#' ends the authority early, and
  // what follows would be read as host, port and path, printing part of the password in
  // messages ("bad port 'pw'") and connecting elsewhere. Refused before anything is quoted.
  // "u:ab@cd:pw/x@h": the same with an '@' in the password too. Any '@' past the authority
  // that a ':' comes before may end a password: refused alike.
  const std::size_t last_at = s.rfind('@');
  if (last_at != std::string::npos && last_at > auth_end && s.find(':', auth_begin) < last_at) {
    bad(text, "'@' after the host: percent-encode '/', '?', '#' and '@' in a user name or password "
              "(%2F, %3F, %23, %40), and '@' elsewhere as %40");
  }
  std::size_t hosts_begin = (at != std::string::npos && at >= auth_begin) ? at + 1 : auth_begin;
  std::string host_list = s.substr(hosts_begin, auth_end - hosts_begin);
  std::vector<std::string> extra_hosts;
  if (std::size_t comma = host_list.find(','); comma != std::string::npos) {
    std::string rest = host_list.substr(comma + 1);
    host_list.resize(comma);
    std::size_t pos = 0;
    while (true) {
      std::size_t next = rest.find(',', pos);
      extra_hosts.push_back(rest.substr(pos, next - pos));
      if (next == std::string::npos) break;
      pos = next + 1;
    }
    if (host_list.empty()) bad(text, "empty host in the host list");
    s = s.substr(0, hosts_begin) + host_list + s.substr(auth_end);
  }
  check_port_text(host_list, text);  // before uriparser, whose error would not say "port"

  ParsedUri p;
  const char* err = nullptr;
  if (uriParseSingleUriA(&p.uri, s.c_str(), &err) != URI_SUCCESS) {
    bad(text, "malformed near position " + std::to_string(err ? err - s.c_str() : 0));
  }
  p.ok = true;
  if (p.uri.fragment.first) bad(text, "a fragment (#…) is not allowed");

  Uri u;
  u.scheme = range(p.uri.scheme);
  std::transform(u.scheme.begin(), u.scheme.end(), u.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string userinfo = range(p.uri.userInfo);
  if (!userinfo.empty()) {
    std::size_t colon = userinfo.find(':');
    u.user = decode(userinfo.substr(0, colon), text);
    if (colon != std::string::npos) u.password = decode(userinfo.substr(colon + 1), text);
  }
  std::string host = range(p.uri.hostText);
  if (!host.empty() || p.uri.portText.first) {
    if (host.empty()) bad(text, "a port without a host");
    u.hosts.push_back({decode(host, text), parse_port(range(p.uri.portText), text)});
  }
  for (const auto& h : extra_hosts) u.hosts.push_back(parse_host(h, text));
  for (auto* seg = p.uri.pathHead; seg; seg = seg->next) {
    u.path += "/" + decode(range(seg->text), text);
  }
  if (p.uri.query.first && p.uri.query.first != p.uri.query.afterLast) {
    UriQueryListA* list = nullptr;
    int count = 0;
    if (uriDissectQueryMallocExA(&list, &count, p.uri.query.first, p.uri.query.afterLast, URI_FALSE,
                                 URI_BR_DONT_TOUCH) != URI_SUCCESS) {
      bad(text, "malformed query");
    }
    std::unique_ptr<UriQueryListA, void (*)(UriQueryListA*)> owner(list, uriFreeQueryListA);
    for (auto* q = list; q; q = q->next) {
      std::string key = q->key ? q->key : "";
      if (key.empty()) bad(text, "empty parameter name");
      for (const auto& [k, v] : u.params) {
        if (k == key) bad(text, "parameter '" + key + "' given twice");
      }
      u.params.emplace_back(key, q->value ? q->value : "");
    }
  }
  return u;
}

std::string percent_encode(std::string_view text, std::string_view keep) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

namespace {
bool is_ipv6(const std::string& host) {
  in6_addr addr{};
  return ::inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}
}  // namespace

// Each part is percent-encoded again, so that Uri::parse(redacted()) gives back this Uri
// when it has no password or secret parameter: the text is handed on (dlock run's
// DLOCK_URI) and must name the same lock service. The "***" of a masked value is literal.
std::string Uri::redacted() const {
  std::string out = scheme + "://";
  if (!user.empty() || password) out += percent_encode(user) + (password ? ":***" : "") + "@";
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (i) out += ",";
    out += is_ipv6(hosts[i].host) ? "[" + hosts[i].host + "]" : percent_encode(hosts[i].host);
    if (hosts[i].port) out += ":" + std::to_string(hosts[i].port);
  }
  out += percent_encode(path, "/");
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& [key, value] = params[i];
    const bool masked = is_secret_param(key) || value == "***";
    out += (i ? "&" : "?") + percent_encode(key) + "=" + (masked ? "***" : percent_encode(value, "/:,"));
  }
  return out;
}

UriParams::UriParams(const Uri& uri) : uri_(uri), left_(uri.params) {}

std::string UriParams::redacted() const {
  Uri shown = uri_;
  for (auto& param : shown.params) {
    // (No structured binding: clang 14 cannot capture one in the lambda.)
    const std::string& key = param.first;
    const bool unread = std::any_of(left_.begin(), left_.end(), [&](const auto& p) { return p.first == key; });
    if (unread) param.second = "***";
  }
  return shown.redacted();
}

std::optional<std::string> UriParams::take_string(std::string_view key) {
  for (auto it = left_.begin(); it != left_.end(); ++it) {
    if (it->first == key) {
      std::string v = std::move(it->second);
      left_.erase(it);
      return v;
    }
  }
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> UriParams::take_duration(std::string_view key) {
  auto v = take_string(key);
  if (!v) return std::nullopt;
  try {
    auto d = parse_duration(*v);
    if (d.count() <= 0) throw Error(ErrorCode::invalid_argument, "must be > 0");
    return d;
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument, "bad URI '" + redacted() + "': parameter " + std::string(key) +
                                                 ": " + (is_secret_param(key) ? "bad duration" : e.message()));
  }
}

std::optional<bool> UriParams::take_bool(std::string_view key) {
  auto v = take_string(key);
  if (!v) return std::nullopt;
  if (*v == "true" || *v == "1" || *v == "yes" || *v == "on") return true;
  if (*v == "false" || *v == "0" || *v == "no" || *v == "off") return false;
  throw Error(ErrorCode::invalid_argument, "bad URI '" + redacted() + "': parameter " +
                                               std::string(key) + " wants true or false, not '" +
                                               shown(key, *v) + "'");
}

std::optional<std::uint64_t> UriParams::take_uint(std::string_view key, std::uint64_t min,
                                                  std::uint64_t max) {
  auto v = take_string(key);
  if (!v) return std::nullopt;
  bool digits = !v->empty() && v->size() <= 19 && std::all_of(v->begin(), v->end(), ::isdigit);
  std::uint64_t n = digits ? std::stoull(*v) : 0;
  if (!digits || n < min || n > max) {
    throw Error(ErrorCode::invalid_argument,
                "bad URI '" + redacted() + "': parameter " + std::string(key) + " wants a number in " +
                    std::to_string(min) + ".." + std::to_string(max) + ", not '" + shown(key, *v) + "'");
  }
  return n;
}

void UriParams::finish() const {
  if (left_.empty()) return;
  std::string names;
  for (const auto& [k, v] : left_) names += (names.empty() ? "" : ", ") + k;
  throw Error(ErrorCode::invalid_argument,
              "bad URI '" + redacted() + "': unknown parameter" + (left_.size() > 1 ? "s " : " ") + names);
}

}  // namespace dlock
