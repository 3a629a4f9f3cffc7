// The conformance suite's entry point.
//
//   dlock_conformance [--backend=mem,file] [--table-dir=DIR] [gtest flags]
//
// --backend selects the backends of this run (default: every registered one); the table of
// every compiled backend is rebuilt in DIR (default: this build's conformance/ directory).
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dlock/dlock.h"
#include "framework/backend_context.h"
#include "framework/result_table.h"

namespace dc = dlock::conformance;

namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::string part;
  for (const char c : text + ",") {
    if (c == ',') {
      if (!part.empty()) out.push_back(part);
      part.clear();
    } else {
      part.push_back(c);
    }
  }
  return out;
}

}  // namespace

// Fails the run if a backend compiled into dlock::dlock has no conformance registration, or
// a registration's scheme is not what dlock::open knows.
TEST(Registration, EveryCompiledBackendIsRegistered) {
  const auto schemes = dlock::registered_schemes();
  for (const auto& b : dc::compiled_backends()) {
    const auto* ctx = dc::find_context(b);
    EXPECT_NE(ctx, nullptr) << "backend '" << b
                            << "' is compiled in but has no conformance registration "
                               "(add conformance/contexts/" << b << "_context.cpp)";
    if (ctx) {
      EXPECT_NE(std::find(schemes.begin(), schemes.end(), ctx->scheme), schemes.end())
          << "scheme '" << ctx->scheme << "' of backend '" << b << "' is not registered with dlock::open";
    }
  }
  for (const auto& ctx : dc::registered_contexts()) {
    const auto compiled = dc::compiled_backends();
    // A second column of one backend counts as that backend: another mode ("postgres_lease")
    // or another server set-up (zookeeper3, compiled_as "zookeeper").
    const std::string as = !ctx.compiled_as.empty() ? ctx.compiled_as
                                                    : ctx.backend.substr(0, ctx.backend.find('_'));
    EXPECT_NE(std::find(compiled.begin(), compiled.end(), as), compiled.end())
        << "conformance registers '" << ctx.backend << "' but " << as << " is not compiled in";
  }
}

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead taker's pipe must give EPIPE, not kill the suite
  std::string table_dir = DLOCK_CONFORMANCE_TABLE_DIR;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--backend=", 0) == 0) {
      const auto chosen = split_commas(arg.substr(10));
      for (const auto& b : chosen) {
        if (!dc::find_context(b)) {
          std::cerr << "dlock_conformance: unknown backend '" << b << "' (registered:";
          for (const auto& c : dc::registered_contexts()) std::cerr << ' ' << c.backend;
          std::cerr << ")\n";
          return 2;
        }
      }
      dc::select_backends(chosen);
    } else if (arg.rfind("--table-dir=", 0) == 0) {
      table_dir = arg.substr(12);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  ::testing::InitGoogleTest(&n, rest.data());
  // Columns: every compiled backend, then the variant runs registered for them.
  auto columns = dc::compiled_backends();
  for (const auto& ctx : dc::registered_contexts()) {
    if (!ctx.compiled_as.empty()) columns.push_back(ctx.backend);
  }
  auto* table = new dc::ResultTable(table_dir, dc::selected_backends(), columns);
  ::testing::UnitTest::GetInstance()->listeners().Append(table);  // gtest owns it
  const int rc = RUN_ALL_TESTS();
  return rc != 0 || table->unexpected_skips() ? 1 : 0;
}
