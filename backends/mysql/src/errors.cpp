#include "errors.h"

#include <string>

namespace dlock::mysql {

bool connection_lost(const sql::SQLException& e) noexcept {
  const int c = e.getErrorCode();
  return c == code::gone_away || c == code::lost_connection || c == code::connection_killed ||
         c == code::server_shutdown || c == code::cant_connect_local || c == code::cant_connect;
}

Error translate_error(std::string_view where, std::string_view doing, const sql::SQLException& e) {
  const int c = e.getErrorCode();
  std::string text = std::string(where) + ": " + std::string(doing) + " failed: " + e.what() +
                     " (error " + std::to_string(c) + ")";
  switch (c) {
    case code::access_denied:
      return Error(ErrorCode::invalid_argument, text + ": wrong user or password");
    case code::db_access_denied:
      return Error(ErrorCode::invalid_argument, text + ": the user has no rights on the database");
    case code::unknown_database:
      return Error(ErrorCode::invalid_argument, text + ": the database does not exist");
    case code::command_denied:
      return Error(ErrorCode::invalid_argument, text + ": a privilege is missing");
    case code::unknown_host:  // a typo, or a DNS outage that passes: retryable
      return Error(ErrorCode::unavailable, text + ": the host name did not resolve");
    case code::tls_error:
      return Error(ErrorCode::unavailable, text + ": TLS was required (ssl_ca) and could not be set up");
    case code::cant_connect_local:
    case code::cant_connect:
      return Error(ErrorCode::unavailable, text + ": cannot connect (is the server running?)");
    case code::read_only:
      return Error(ErrorCode::unavailable, text + ": the server is read-only");
    case code::gone_away:
    case code::lost_connection:
    case code::too_many_connections:
    case code::server_shutdown:
    case code::connection_killed:
    case code::lock_wait_timeout:
    case code::deadlock:
    case code::query_interrupted:
      return Error(ErrorCode::unavailable, text);
    default:
      break;
  }
  if (c >= 2000 && c < 3000) return Error(ErrorCode::unavailable, text);  // client-side errors
  return Error(ErrorCode::internal, text);
}

}  // namespace dlock::mysql
