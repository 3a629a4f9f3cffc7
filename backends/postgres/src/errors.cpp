#include "errors.h"

namespace dlock::postgres {
namespace {

bool contains(std::string_view text, std::string_view word) { return text.find(word) != std::string_view::npos; }

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (auto& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

Error from_connect(const std::string& head, const std::string& msg) {
  const std::string detail = " (libpq said: " + msg + ")";
  if (contains(msg, "password authentication failed") || contains(msg, "no password supplied") ||
      contains(msg, "authentication failed")) {
    return Error(ErrorCode::invalid_argument, head + "authentication failed: wrong user or password" + detail);
  }
  if (contains(msg, "does not exist")) {
    return Error(ErrorCode::invalid_argument,
                 head + "the database or role in the URI does not exist on the server" + detail);
  }
  if (contains(msg, "pg_hba.conf")) {
    return Error(ErrorCode::invalid_argument,
                 head + "the server's pg_hba.conf rejects this user, database or address" + detail);
  }
  if (contains(msg, "unrecognized configuration parameter")) {
    return Error(ErrorCode::unsupported,
                 head + "the server lacks a session setting dlock needs (idle_session_timeout and "
                        "client_connection_check_interval need PostgreSQL 14 or later)" + detail);
  }
  if (contains(msg, "permission denied")) {
    return Error(ErrorCode::invalid_argument, head + "permission denied" + detail);
  }
  return Error(ErrorCode::unavailable, head + "cannot connect" + detail);
}

}  // namespace

std::string sqlstate_of(const PGresult* result) {
  if (result == nullptr) return {};
  const char* s = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  return s ? std::string(s) : std::string();
}

Error translate_error(std::string_view where, std::string_view doing, const PGconn* conn,
                      const PGresult* result) {
  const std::string head = std::string(where) + ": " + std::string(doing) + ": ";
  const std::string conn_msg = conn ? trimmed(PQerrorMessage(conn)) : std::string("out of memory");
  const bool conn_ok = conn != nullptr && PQstatus(conn) == CONNECTION_OK;
  const std::string state = sqlstate_of(result);
  if (result == nullptr || state.empty()) {
    if (conn == nullptr) return Error(ErrorCode::unavailable, head + "out of memory for a connection");
    if (!conn_ok && result == nullptr) return from_connect(head, conn_msg);
    if (!conn_ok) return Error(ErrorCode::unavailable, head + "connection lost (libpq said: " + conn_msg + ")");
    if (result == nullptr) return Error(ErrorCode::unavailable, head + conn_msg);
    return Error(ErrorCode::internal, head + "unexpected result " +
                                          std::string(PQresStatus(PQresultStatus(result))));
  }
  const std::string detail = " (server said: " + trimmed(PQresultErrorMessage(result)) + ")";
  const std::string cls = state.substr(0, 2);
  if (cls == "28") return Error(ErrorCode::invalid_argument, head + "authentication failed" + detail);
  if (cls == "3D") return Error(ErrorCode::invalid_argument, head + "the database does not exist" + detail);
  if (state == "42501") {
    return Error(ErrorCode::invalid_argument,
                 head + "the user lacks a privilege dlock needs (README.md, \"Privileges\")" + detail);
  }
  if (state == "3F000") {  // the URI's schema= (the server's message names it)
    return Error(ErrorCode::invalid_argument,
                 head + "the schema does not exist: create it or fix schema= in the URI" + detail);
  }
  if (state == "42P01") {
    return Error(ErrorCode::invalid_argument,
                 head + "the fence table is missing: create it (README.md) or set create_tables=true" + detail);
  }
  if (state == "23502" && detail.find("\"token\"") != std::string::npos) {
    return Error(ErrorCode::invalid_argument,
                 head + "the fence table was made by an earlier dlock (a token column): open it once "
                        "with create_tables=true to upgrade it (README.md, \"Upgrading\")" + detail);
  }
  if (state == "25006") {
    return Error(ErrorCode::unavailable,
                 head + "the server is read-only (a hot standby?): point the URI at the primary, "
                        "e.g. with target_session_attrs=read-write" + detail);
  }
  if (state == "53200") {
    return Error(ErrorCode::unavailable,
                 head + "the server's lock table is full (raise max_locks_per_transaction)" + detail);
  }
  if (cls == "53" || cls == "57" || cls == "08" || cls == "40" || state == "55P03") {
    return Error(ErrorCode::unavailable, head + "the server cannot serve now" + detail);
  }
  if (cls == "42" || cls == "22") return Error(ErrorCode::invalid_argument, head + "rejected" + detail);
  return Error(ErrorCode::internal, head + "unexpected error" + detail);
}

}  // namespace dlock::postgres
