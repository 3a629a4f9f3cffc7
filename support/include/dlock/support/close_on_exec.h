// Keeping a client library's descriptors out of the processes the user starts.
//
// hiredis, Connector/C++ (libmariadb) and the ZooKeeper C client open their sockets without
// O_CLOEXEC. A service that holds a lock and
// starts a helper with fork + exec (system(), posix_spawn) would hand the helper those
// descriptors: a session lock would then live as long as the helper, which could also write
// into the connection. The backends mark them close-on-exec as soon as they exist, and
// `dlock run` marks every descriptor it was not started with before it spawns CMD. A
// descriptor a library opens is exposed from its creation until it is marked (a fork + exec
// by another thread in that window still inherits it).
#pragma once

#include <vector>

namespace dlock::support {

// Marks `fd` close-on-exec. Returns false if it could not (a closed fd). Never throws.
bool set_close_on_exec(int fd) noexcept;

// The descriptors that an exec would keep now (no FD_CLOEXEC), stdio included, sorted; empty
// when /proc/self/fd cannot be read. (A library may get fd 0-2 when the process was started
// with stdio closed: those are marked like any other.)
std::vector<int> inheritable_descriptors();

// Every descriptor open now, close-on-exec or not, stdio included, sorted; empty when
// /proc/self/fd cannot be read.
std::vector<int> open_descriptors();

// Marks close-on-exec every inheritable descriptor open now that is not in `before` (taken
// with inheritable_descriptors() before a library call that opens descriptors). One opened
// meanwhile by another thread is marked too: harmless, it only stays out of an exec. Never
// throws.
void close_new_descriptors_on_exec(const std::vector<int>& before) noexcept;

}  // namespace dlock::support
