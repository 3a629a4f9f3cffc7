// The ZooKeeper C client, single-threaded build (libzookeeper_st.so.2, Debian package
// libzookeeper-st2), loaded at run time into a symbol scope of its own.
//
// Why the single-threaded build: the multi-threaded one hands every request to its IO
// thread through a pipe and every asynchronous answer to its completion thread, two thread
// hops per request that its synchronous calls (which wait without a deadline) partly skip.
// With the single-threaded build a caller writes its request to the socket itself and our
// own thread (driver.h) reads the answer and completes it: one hop, the least there is.
//
// Why loaded at run time (dlopen with RTLD_LOCAL | RTLD_DEEPBIND): both builds export the
// same names, internal ones included. A process that also links the multi-threaded build
// (an application, our integration tests and bench) would otherwise bind some of one
// build's calls to the other's code. Under a sanitizer (which refuses RTLD_DEEPBIND) the
// library is loaded without it, and such a process must not link the other build.
#pragma once

#include <zookeeper/zookeeper.h>

namespace dlock::zookeeper {

// The entry points and constants this backend uses, as the library defines them.
struct CClient {
  decltype(&::zookeeper_init2) init;
  decltype(&::zookeeper_close) close;
  decltype(&::zookeeper_interest) interest;
  decltype(&::zookeeper_process) process;
  decltype(&::zookeeper_get_connected_host) connected_host;
  decltype(&::zoo_set_servers_resolution_delay) set_servers_resolution_delay;
  decltype(&::zoo_add_auth) add_auth;
  decltype(&::zoo_client_id) client_id;
  decltype(&::zoo_recv_timeout) recv_timeout;
  decltype(&::zoo_acreate) acreate;
  decltype(&::zoo_amulti) amulti;
  decltype(&::zoo_create_op_init) create_op_init;
  decltype(&::zoo_set_op_init) set_op_init;
  decltype(&::zoo_aget_children) aget_children;
  decltype(&::zoo_adelete) adelete;
  decltype(&::zoo_aexists) aexists;
  decltype(&::zoo_async) async;  // sync: answered only once the leader has processed it
  decltype(&::zoo_awget) awget;
  decltype(&::zoo_aremove_all_watches) aremove_all_watches;
  decltype(&::zerror) error_text;

  const ACL_vector* open_acl_unsafe;
  const ACL_vector* creator_all_acl;
  int persistent;
  int container;
  int ephemeral_sequential;
  int session_event;
  int deleted_event;
  int connected_state;
  int expired_session_state;
  int auth_failed_state;
  int read_interest;   // ZOOKEEPER_READ
  int write_interest;  // ZOOKEEPER_WRITE
};

// The library, loaded on first use (thread-safe). Throws Error(unsupported) naming the
// library and the package to install when it cannot be loaded.
const CClient& c_client();

}  // namespace dlock::zookeeper
