// The command line of `dlock`: what the user asked for, checked, and the --help text.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

// `dlock run [options] NAME -- CMD ARGS…`, parsed and checked.
struct RunArgs {
  std::optional<std::string> uri;                   // --uri or --uri-file; empty: $DLOCK_URI, then the default
  std::optional<std::chrono::milliseconds> wait;    // --wait; empty: forever; 0: try once
  std::optional<std::chrono::milliseconds> lease;   // --lease (> 0); empty: watchdog-renewed
  std::optional<std::chrono::milliseconds> max_hold;  // --max-hold (> 0); empty: no limit
  bool shared = false;                              // --shared: a reader's hold
  std::chrono::milliseconds grace{5000};            // --grace: SIGTERM → SIGKILL delay on loss
  bool verbose = false;                             // --verbose: say what dlock does, on stderr
  std::string name;
  std::vector<std::string> command;                 // never empty
};

// What parsing decided: run with `args`, or stop at once printing `out` (stdout) / `err`
// (stderr, one line) and exiting with `exit_code` (0 for --help/--version, 64 for misuse).
struct ParsedCommandLine {
  std::optional<RunArgs> args;
  int exit_code = 0;
  std::string out;
  std::string err;
};

// Parses main()'s arguments. Never throws, never exits the process.
ParsedCommandLine parse_command_line(int argc, const char* const* argv);

}  // namespace dlock::cli
