#include "errors.h"

#include <string>

#include <zookeeper/zookeeper.h>

#include "c_client.h"
#include "names.h"

namespace dlock::zookeeper {

bool is_transport_error(int rc) noexcept {
  return rc == kTimedOut || rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT ||
         rc == ZSESSIONEXPIRED || rc == ZSESSIONMOVED || rc == ZINVALIDSTATE || rc == ZCLOSING ||
         rc == ZTHROTTLEDOP || rc == ZSYSTEMERROR || rc == ZNOTREADONLY ||
         rc == ZRUNTIMEINCONSISTENCY;  // a reply out of order: the client drops the connection
}

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto cp = utf8_at(text, i);
    const std::size_t n = cp ? cp->second : 1;
    if (cp && zk_path_char(cp->first)) {
      out.append(text.substr(i, n));
    } else {
      for (std::size_t j = i; j < i + n; ++j) {
        const auto b = static_cast<unsigned char>(text[j]);
        out += '%';
        out += kHex[b >> 4];
        out += kHex[b & 0xf];
      }
    }
    i += n;
  }
  return out;
}

Error translate_error(std::string_view where, std::string_view doing, std::string_view node, int rc) {
  std::string msg = std::string(where) + ": " + std::string(doing);
  if (!node.empty()) msg += " " + printable(node);
  if (rc == kTimedOut) {
    return Error(ErrorCode::unavailable, msg + ": no answer within command_timeout");
  }
  msg += ": ";
  msg += c_client().error_text(rc);  // loaded: only a session's request has an rc
  msg += " (" + std::to_string(rc) + ")";
  if (is_transport_error(rc)) return Error(ErrorCode::unavailable, msg);
  if (rc == ZNOAUTH || rc == ZAUTHFAILED || rc == ZINVALIDACL) {
    return Error(ErrorCode::invalid_argument,
                 msg + " (the node's ACL denies this client: check the credentials in the URI)");
  }
  if (rc == ZBADARGUMENTS) return Error(ErrorCode::invalid_argument, msg);
  if (rc == ZUNIMPLEMENTED) return Error(ErrorCode::unsupported, msg);
  return Error(ErrorCode::internal, msg);
}

}  // namespace dlock::zookeeper
