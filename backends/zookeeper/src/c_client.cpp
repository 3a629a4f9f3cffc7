#include "c_client.h"

#include <dlfcn.h>

#include <string>

#include "dlock/error.h"

namespace dlock::zookeeper {
namespace {

constexpr const char* kLibrary = "libzookeeper_st.so.2";

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

[[noreturn]] void refuse(const std::string& why) {
  throw Error(ErrorCode::unsupported, std::string("zookeeper: cannot load the ZooKeeper C client ") + kLibrary +
                                          " (Debian package libzookeeper-st2): " + why);
}

template <class T>
void resolve(void* lib, const char* name, T& out) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) refuse(std::string("it has no ") + name);
  out = reinterpret_cast<T>(sym);
}

int constant(void* lib, const char* name) {
  const int* value = nullptr;
  resolve(lib, name, value);
  return *value;
}

CClient load() {
  const int flags = RTLD_NOW | RTLD_LOCAL | (kSanitized ? 0 : RTLD_DEEPBIND);
  void* lib = dlopen(kLibrary, flags);  // never closed: handles may outlive any owner
  if (lib == nullptr) {
    const char* why = dlerror();
    refuse(why != nullptr ? why : "dlopen failed");
  }
  CClient c{};
  resolve(lib, "zookeeper_init2", c.init);
  resolve(lib, "zookeeper_close", c.close);
  resolve(lib, "zookeeper_interest", c.interest);
  resolve(lib, "zookeeper_process", c.process);
  resolve(lib, "zookeeper_get_connected_host", c.connected_host);
  resolve(lib, "zoo_set_servers_resolution_delay", c.set_servers_resolution_delay);
  resolve(lib, "zoo_add_auth", c.add_auth);
  resolve(lib, "zoo_client_id", c.client_id);
  resolve(lib, "zoo_recv_timeout", c.recv_timeout);
  resolve(lib, "zoo_acreate", c.acreate);
  resolve(lib, "zoo_amulti", c.amulti);
  resolve(lib, "zoo_create_op_init", c.create_op_init);
  resolve(lib, "zoo_set_op_init", c.set_op_init);
  resolve(lib, "zoo_aget_children", c.aget_children);
  resolve(lib, "zoo_adelete", c.adelete);
  resolve(lib, "zoo_aexists", c.aexists);
  resolve(lib, "zoo_async", c.async);
  resolve(lib, "zoo_awget", c.awget);
  resolve(lib, "zoo_aremove_all_watches", c.aremove_all_watches);
  resolve(lib, "zerror", c.error_text);
  resolve(lib, "ZOO_OPEN_ACL_UNSAFE", c.open_acl_unsafe);
  resolve(lib, "ZOO_CREATOR_ALL_ACL", c.creator_all_acl);
  c.persistent = constant(lib, "ZOO_PERSISTENT");
  c.container = constant(lib, "ZOO_CONTAINER");
  c.ephemeral_sequential = constant(lib, "ZOO_EPHEMERAL_SEQUENTIAL");
  c.session_event = constant(lib, "ZOO_SESSION_EVENT");
  c.deleted_event = constant(lib, "ZOO_DELETED_EVENT");
  c.connected_state = constant(lib, "ZOO_CONNECTED_STATE");
  c.expired_session_state = constant(lib, "ZOO_EXPIRED_SESSION_STATE");
  c.auth_failed_state = constant(lib, "ZOO_AUTH_FAILED_STATE");
  c.read_interest = constant(lib, "ZOOKEEPER_READ");
  c.write_interest = constant(lib, "ZOOKEEPER_WRITE");
  return c;
}

}  // namespace

const CClient& c_client() {
  static const CClient client = load();  // a failed load throws, and the next call tries again
  return client;
}

}  // namespace dlock::zookeeper
