// The `dlock` command line. See `dlock run --help` and adapters/cli/README.md.
#include <iostream>

#include "run_args.h"
#include "run_command.h"

int main(int argc, char** argv) {
  dlock::cli::ParsedCommandLine parsed = dlock::cli::parse_command_line(argc, argv);
  if (!parsed.args) {
    std::cout << parsed.out;
    if (!parsed.err.empty()) std::cerr << parsed.err << "\n";
    return parsed.exit_code;
  }
  return dlock::cli::run_locked(*parsed.args);
}
