#include "run_args.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/duration.h"
#include "dlock/error.h"
#include "dlock/open.h"
#include "exit_codes.h"

namespace dlock::cli {
namespace {

constexpr const char* kFooter = R"(Runs CMD while holding the distributed lock NAME, like flock(1) or `etcdctl lock`,
and releases the lock when CMD exits.

The command gets in its environment:
  DLOCK_NAME            the lock's name
  DLOCK_FENCING_TOKEN   the acquisition's fencing token (strictly increasing across holders
                        of NAME on backends with fencing): pass it to the resource you protect
                        so it can reject a stale writer.
  DLOCK_URI             the lock service's URI, password replaced by ***

Lock service: --uri or --uri-file, else $DLOCK_URI, else file:// under $XDG_RUNTIME_DIR/dlock
(or /tmp/dlock-$UID), created with mode 0700: one host, no server. A URI with a password
given by --uri is visible to every user in `ps`: give it with --uri-file (a file only you
can read) or $DLOCK_URI instead.
@SCHEMES@

Durations: 250ms, 5s, 1.5s, 2m, 1h. --wait and --grace also take 0; --wait also takes
"forever" (the default).

CMD runs in a process group of its own. If the lock is lost while CMD runs (lease not
renewed, session gone), the group gets SIGTERM, then SIGKILL after --grace or a safety margin
before the lock may be granted to someone else, whichever comes first, and dlock exits 70. At --max-hold the
group is stopped the same way while dlock still holds the lock, released once CMD is gone
(exit 70). SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to dlock are forwarded to the group,
and so are SIGTSTP, SIGTTIN, SIGTTOU and SIGCONT (dlock itself never stops: the lock stays
held while CMD is stopped); the lock is released once CMD has exited. If dlock itself is
killed (even SIGKILL) or stopped, a guard process ("lock-guard") stops the group, with
SIGKILL a margin before the lock may be free; a lock that dies with dlock's descriptors
(file://) stays held by the guard until the group is gone. A process that leaves the group (setsid, a daemon) is beyond dlock's reach.
SIGINT, SIGTERM, SIGHUP or SIGQUIT received while waiting for the lock cancels the wait
(exit 128+signal).

Exit status:
  CMD's own status, or 128+N if CMD was killed by signal N
  64   usage error: bad option, duration, URI, name, or missing '--'
  69   the lock service is unavailable
  70   the lock was lost while CMD ran (CMD was stopped)
  71   internal or system error
  75   the lock was not acquired within --wait
  126  CMD could not be executed
  127  CMD was not found)";

// CLI11 2.1 cannot show the "-- CMD [ARGS...]" part of the usage line by itself.
class RunFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: dlock run [OPTIONS] NAME -- CMD [ARGS...]\n";
  }
};

// The footer with the schemes compiled into this binary and an example for each: never a
// scheme that `dlock run` would refuse.
std::string footer() {
  std::string text = kFooter;
  std::string line = "Schemes compiled in:";
  const std::vector<std::pair<std::string, std::string>> examples = {
      {"file", "file:///var/lock/app"},       {"mem", "mem:// (this process only)"},
      {"redis", "redis://127.0.0.1:6379/0"},  {"redis+unix", "redis+unix:///run/redis.sock"},
      {"zk", "zk://h1:2181,h2:2181/app"},     {"postgres", "postgres://user@host/db"},
      {"mysql", "mysql://user@host/db"},      {"mariadb", "mariadb://user@host/db"}};
  for (const std::string& scheme : registered_schemes()) {
    std::string shown = scheme + "://";
    for (const auto& [name, example] : examples) {
      if (name == scheme) shown = example;
    }
    line += "\n  " + shown;
  }
  text.replace(text.find("@SCHEMES@"), 9, line);
  return text;
}

// The URI in the first line of `path` (surrounding blanks and the line end dropped).
// Never quotes the file's content: it may hold a password.
std::string read_uri_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw Error(ErrorCode::invalid_argument, "cannot read --uri-file " + path + ": " + std::strerror(errno));
  }
  std::string uri;
  std::getline(in, uri);
  const auto blank = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!uri.empty() && blank(static_cast<unsigned char>(uri.back()))) uri.pop_back();
  std::size_t first = 0;
  while (first < uri.size() && blank(static_cast<unsigned char>(uri[first]))) ++first;
  uri.erase(0, first);
  if (uri.empty()) throw Error(ErrorCode::invalid_argument, "--uri-file " + path + " has no URI on its first line");
  return uri;
}

std::optional<std::chrono::milliseconds> parse_wait(const std::string& text) {
  if (text == "forever") return std::nullopt;
  if (text == "0") return std::chrono::milliseconds{0};
  return parse_duration(text);
}

std::chrono::milliseconds parse_positive(const std::string& option, const std::string& text) {
  auto d = parse_duration(text);
  if (d <= std::chrono::milliseconds::zero()) {
    throw Error(ErrorCode::invalid_argument, option + " must be greater than 0, got '" + text + "'");
  }
  return d;
}

ParsedCommandLine usage_error(const std::string& message) {
  ParsedCommandLine r;
  r.exit_code = kExitUsage;
  r.err = "dlock: " + message + " (see 'dlock run --help')";
  return r;
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, const char* const* argv) {
  // The command starts after the first "--"; CLI11 only sees what comes before it.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      split = i;
      break;
    }
  }

  CLI::App app{"dlock: run a command while holding a distributed lock", "dlock"};
  app.set_version_flag("--version", "dlock 0.1.0");
  app.require_subcommand(1);
  app.footer("Run 'dlock run --help' for the options, environment and exit codes.");

  std::string uri, uri_file, wait, lease, max_hold, grace = "5s";
  RunArgs args;
  CLI::App* run = app.add_subcommand("run", "Run a command while holding a lock");
  run->formatter(std::make_shared<RunFormatter>());
  CLI::Option* uri_option =
      run->add_option("--uri", uri, "Lock service URI (default: $DLOCK_URI, then file:// in a per-user dir)")
          ->type_name("URI");
  run->add_option("--uri-file", uri_file, "Read the lock service URI from the first line of FILE\n"
                  "(keeps a password out of the command line and `ps`)")
      ->type_name("FILE")
      ->excludes(uri_option);
  run->add_option("--wait", wait, "How long to wait for the lock (default: forever; 0: try once)")
      ->type_name("DURATION");
  run->add_option("--lease", lease, "Hold the lock at most this long, unrenewed: CMD is stopped when it runs out\n"
                   "(default: the backend's lease, renewed until CMD exits)")
      ->type_name("DURATION");
  run->add_option("--max-hold", max_hold, "Stop CMD after this long (SIGTERM, SIGKILL after --grace), then\n"
                   "release the lock (a crashed dlock still frees it within one default lease)")
      ->type_name("DURATION");
  run->add_flag("--shared", args.shared, "Take a shared (reader) hold instead of an exclusive one");
  run->add_option("--grace", grace, "Delay between SIGTERM and SIGKILL when CMD is stopped (shorter if\n"
                   "the lock may be granted to someone else sooner)")
      ->type_name("DURATION")
      ->capture_default_str();
  run->add_flag("-v,--verbose", args.verbose, "Report acquisition and release on stderr");
  run->add_option("NAME", args.name, "Name of the lock (any bytes; case-sensitive)")->required();
  run->footer(footer());

  std::vector<const char*> head(argv, argv + split);
  try {
    app.parse(static_cast<int>(head.size()), head.data());
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    std::ostringstream out, err;
    ParsedCommandLine r;
    r.exit_code = app.exit(e, out, err);
    r.out = out.str();
    return r;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }

  if (split == argc) return usage_error("missing '--' before the command to run");
  args.command.assign(argv + split + 1, argv + argc);
  if (args.command.empty()) return usage_error("no command after '--'");

  try {
    if (run->count("--uri") != 0) args.uri = uri;
    if (run->count("--uri-file") != 0) args.uri = read_uri_file(uri_file);
    if (run->count("--wait") != 0) args.wait = parse_wait(wait);
    if (run->count("--lease") != 0) args.lease = parse_positive("--lease", lease);
    if (run->count("--max-hold") != 0) args.max_hold = parse_positive("--max-hold", max_hold);
    args.grace = grace == "0" ? std::chrono::milliseconds{0} : parse_duration(grace);
  } catch (const Error& e) {
    return usage_error(e.what());
  }
  ParsedCommandLine r;
  r.args = std::move(args);
  return r;
}

}  // namespace dlock::cli
