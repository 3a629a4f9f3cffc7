// The `dlock` command line. See `dlock run --help` and adapters/cli/README.md.
#include <iostream>
#include <string_view>

#include "child.h"

#include "run_args.h"
#include "run_command.h"

int main(int argc, char** argv) {
  // dlock re-executes itself as the guard of a running command (see CommandGuard).
  if (argc >= 2 && std::string_view(argv[1]) == dlock::cli::kGuardCommand) {
    return dlock::cli::run_guard(argc, argv);
  }
  dlock::cli::ParsedCommandLine parsed = dlock::cli::parse_command_line(argc, argv);
  if (!parsed.args) {
    std::cout << parsed.out;
    if (!parsed.err.empty()) std::cerr << parsed.err << "\n";
    return parsed.exit_code;
  }
  return dlock::cli::run_locked(*parsed.args);
}
