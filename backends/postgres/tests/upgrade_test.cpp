// A fence table made by an earlier dlock (key, name, token NOT NULL; no sequence). Test
// servers and users' databases keep it across upgrades: the backend must not fail on it with
// an "internal" error, and tokens must stay above the ones the earlier build handed out.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "dlock/error.h"
#include "test_server.h"

namespace dlock::postgres {
namespace {

// An earlier build's table, with one row whose token is far above today's clock in µs.
constexpr std::int64_t kEarlierToken = 4'000'000'000'000'000;

std::string make_earlier_table(const std::string& tag) {
  std::string table = "old_" + tag.substr(4);  // pgt-<pid>-<n> -> old_<pid>-<n>
  for (char& c : table) c = c == '-' ? '_' : c;
  test::admin("DROP TABLE IF EXISTS " + table + "; DROP SEQUENCE IF EXISTS " + table + "_token; " +
              "CREATE TABLE " + table + " (key bigint PRIMARY KEY, name bytea NOT NULL, token bigint NOT NULL); " +
              "INSERT INTO " + table + " VALUES (1, 'x', " + std::to_string(kEarlierToken) + ")");
  return table;
}

TEST(PgUpgrade, AnEarlierFenceTableIsUpgradedAndTokensStayAboveItsOwn) {
  const auto tag = test::fresh_tag();
  const auto table = make_earlier_table(tag);
  auto p = test::open_tagged(tag, "&table=" + table);
  auto l = p->try_lock("after-upgrade");
  ASSERT_TRUE(l);
  EXPECT_GT(l->fencing_token(), static_cast<std::uint64_t>(kEarlierToken))
      << "a token below one the earlier build handed out";
  EXPECT_TRUE(l->release());
  // A second open finds the table upgraded already and changes nothing.
  auto q = test::open_tagged(tag, "&table=" + table);
  auto m = q->try_lock("after-upgrade");
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->release());
  test::admin("DROP TABLE " + table + "; DROP SEQUENCE IF EXISTS " + table + "_token");
}

TEST(PgUpgrade, WithoutCreateTablesAnEarlierTableIsNamedNotAnInternalError) {
  const auto tag = test::fresh_tag();
  const auto table = make_earlier_table(tag);
  test::admin("CREATE SEQUENCE " + table + "_token AS bigint");
  try {
    auto p = test::open_tagged(tag, "&create_tables=false&table=" + table);
    static_cast<void>(p->try_lock("n"));
    ADD_FAILURE() << "an earlier build's table was used without an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("create_tables=true"), std::string::npos) << e.what();
  }
  test::admin("DROP TABLE " + table + "; DROP SEQUENCE IF EXISTS " + table + "_token");
}

}  // namespace
}  // namespace dlock::postgres
