// Integration-test helpers: the MariaDB named by DLOCK_TEST_MYSQL_URI, one throwaway
// database per test (the test user owns dlock_*), and raw SQL through Connector/C++ for
// checks the provider API cannot make (KILL, INNODB_TRX).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace sql {
class Connection;
}

namespace dlock::mysql::test {

inline constexpr const char* kNoServerMessage =
    "DLOCK_TEST_MYSQL_URI is not set: start the server with scripts/servers.sh start mariadb "
    "and eval \"$(scripts/servers.sh env)\"";

// DLOCK_TEST_MYSQL_URI, or "" when unset.
std::string server_uri();

// A database of its own, dropped on destruction.
class TestDb {
 public:
  TestDb();
  ~TestDb();
  const std::string& name() const { return name_; }
  // The provider URI for this database, with `params` ("a=b&c=d") as its query.
  std::string uri(const std::string& params = "") const;
  // Runs one statement on a fresh admin connection; returns the first column of each row.
  std::vector<std::string> query(const std::string& text) const;
  // Runs one statement as root (no password on the test server: scripts/servers.sh), for
  // server-wide settings (SET GLOBAL …) a test must change and put back.
  static void run_as_root(const std::string& text);
  // Connection ids whose transactions hold rows (or wait, with waiting_too) in this database,
  // from a snapshot of INNODB_TRX taken after the call began (however often it is polled).
  // Throws std::runtime_error if the server serves no fresh one within 5 s.
  std::vector<std::string> lock_transactions(bool waiting_too) const;

 private:
  std::string name_;
};

}  // namespace dlock::mysql::test
