// How a backend plugs into the conformance suite: one BackendContext per backend, registered
// by a static Registrar in conformance/contexts/<backend>_context.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/options.h"

namespace dlock::conformance {

// What a backend claims. Cases gated on a claim the backend does not make are reported
// "not claimed"; a claimed case that fails is a failure. The Capabilities-mirroring flags
// are also checked against what the provider itself reports.
struct Claims {
  bool reentrant = false;
  bool read_write = false;
  bool fair = false;
  bool fencing = false;
  bool push_wakeup = false;
  Liveness liveness = Liveness::lease;
  bool cross_process = false;   // locks are shared between processes (taker cases)
  bool network_faults = false;  // a TCP fault proxy can sit between client and server
  bool server_restart = false;  // the test server can be restarted while a lock is held
  // The server session is the TCP connection (MySQL, PostgreSQL): a reset ends the session
  // and the server frees its locks at that instant, before the holder can learn of it. The
  // network cases count such a reset as sabotage (a loss), not as a double grant.
  bool session_is_connection = false;
  // The env can expire the provider's server session from outside (ZooKeeper):
  // BackendEnv::expire_sessions() is implemented.
  bool session_expiry = false;
  // The env runs against a server ensemble whose members can be stopped and started
  // (BackendEnv::stop_member / start_member / members).
  bool ensemble = false;
};

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// Options for the URI of one provider in a case.
struct UriOptions {
  // Connect through this local port (a TcpProxy) instead of the server's own address.
  std::optional<std::uint16_t> via_port;
};

// One case's isolated slice of a backend: its own directory, key prefix or database, so
// cases never see each other's locks. Created in the fixture's SetUp, destroyed in TearDown.
class BackendEnv {
 public:
  virtual ~BackendEnv() = default;

  // A URI for a provider of this slice. Every provider of one env shares one lock namespace.
  // The URI selects the backend's short default lease (BackendContext::short_lease).
  virtual std::string uri(const UriOptions& options = {}) const = 0;

  // Destroys the held lock `name` from outside, as a crash of the server-side state would:
  // deletes the key, the file, or kills the session. Throws std::runtime_error on failure.
  virtual void sabotage(std::string_view name) = 0;

  // The server's address, for networked backends (the fault proxy's target).
  virtual std::optional<HostPort> server() const { return std::nullopt; }

  // Restarts the test server (blocking until it answers again). Throws std::runtime_error.
  virtual void restart_server();

  // What the slice's storage holds beyond what released locks may leave by design (fencing
  // counters, lock files): leftover queue entries, waiter nodes, holders. Called when no lock
  // is held or awaited. Backends that cannot look return an empty list.
  virtual std::vector<std::string> residue() const { return {}; }

  // Throws std::runtime_error if anything escaped the slice's namespace (a file outside its
  // directory...). Backends that cannot tell do nothing.
  virtual void check_namespace_contained() const {}

  // Claims::session_expiry: makes the server expire every session this env's providers
  // opened (ZooKeeper: a second handle with the same session id, then close it). Blocks until
  // the server has expired them. Throws std::runtime_error.
  virtual void expire_sessions();

  // Claims::ensemble: how many members; stop/start one (0-based), blocking until it is down
  // or answers again; the member a provider's session is connected to is the backend's
  // business (cases stop members one by one). Throw std::runtime_error.
  virtual int members() const { return 0; }
  virtual void stop_member(int index);
  virtual void start_member(int index);
};

// A URI the backend must reject with invalid_argument, and a word the message must contain.
struct MalformedUri {
  std::string uri;
  std::string must_mention;
};

struct BackendContext {
  std::string backend;  // the CMake name, as in DLOCK_COMPILED_BACKENDS: "mem", "redis"
  std::string scheme;   // the URI scheme registered with dlock::open
  // A variant run of a compiled backend against another server setup (e.g. "zookeeper3":
  // zookeeper against a 3-member ensemble), with its own column; empty: `backend` itself.
  std::string compiled_as;
  Claims claims;
  // The default lease the env's URIs select: short, so lease and watchdog cases run fast.
  std::chrono::milliseconds short_lease{2000};
  // Slack added to every timing bound (scheduling noise, round trips).
  std::chrono::milliseconds tolerance{400};
  std::vector<MalformedUri> malformed_uris;
  // A URI pointing at a port where nothing listens; "" when not networked.
  std::function<std::string(std::uint16_t closed_port)> closed_port_uri;
  // Creates one case's slice. Throws std::runtime_error when the backend's test server is not
  // configured (e.g. "DLOCK_TEST_REDIS_URI not set"): the case then fails, never skips.
  std::function<std::unique_ptr<BackendEnv>()> make_env;
};

// Adds `context` to the suite. Called from static Registrars.
void register_context(BackendContext context);

// Every registered context, in registration order.
const std::vector<BackendContext>& registered_contexts();

// The context for `backend`, or nullptr.
const BackendContext* find_context(std::string_view backend);

// Which backends this run covers: set from --backend=a,b before gtest registers the cases;
// empty means every registered backend.
void select_backends(std::vector<std::string> backends);
std::vector<std::string> selected_backends();

// The backends compiled into dlock::dlock (the DLOCK_COMPILED_BACKENDS CMake variable).
std::vector<std::string> compiled_backends();

struct Registrar {
  explicit Registrar(BackendContext (*make)()) { register_context(make()); }
};

}  // namespace dlock::conformance
