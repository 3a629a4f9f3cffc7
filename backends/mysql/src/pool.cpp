#include "pool.h"

#include "dlock/error.h"

namespace dlock::mysql {

Pool::Pool(const MysqlOptions& options, FdMonitor* monitor)
    : options_(options), monitor_(monitor), slots_(std::make_shared<Slots>(options.pool)) {}

std::shared_ptr<Connection> Pool::pop_idle(ConnClass cls) {
  const auto now = std::chrono::steady_clock::now();
  const auto stale = options_.idle_limit();
  std::vector<std::shared_ptr<Connection>> drop;  // destroyed outside the lock
  std::lock_guard lock(mu_);
  for (auto it = idle_.end(); it != idle_.begin();) {
    --it;
    if ((*it)->broken || now - (*it)->last_used >= stale) {
      drop.push_back(std::move(*it));
      it = idle_.erase(it);
      continue;
    }
    if ((*it)->cls() == cls) {
      auto c = std::move(*it);
      idle_.erase(it);
      return c;
    }
  }
  return nullptr;
}

bool Pool::drop_one_idle() {
  std::shared_ptr<Connection> victim;
  std::lock_guard lock(mu_);
  if (idle_.empty()) return false;
  victim = std::move(idle_.front());
  idle_.erase(idle_.begin());
  return true;
}

std::shared_ptr<Connection> Pool::get(ConnClass cls) {
  if (auto c = pop_idle(cls)) return c;
  const auto now = std::chrono::steady_clock::now();
  // A connection of the other class idling in the cache gives its slot up first.
  if (!slots_->take(now) && !(drop_one_idle() && slots_->take(now + options_.command_timeout)) &&
      !slots_->take(now + options_.command_timeout)) {
    throw Error(ErrorCode::unavailable,
                options_.where + ": connection pool exhausted: " + std::to_string(slots_->cap()) +
                    " connections are open (each hold and each waiter pins one); raise pool= "
                    "or release locks");
  }
  std::shared_ptr<Connection> conn = Connection::open(options_, cls, slots_, &behind_proxy_);
  if (monitor_ != nullptr && conn->fd() >= 0) {
    std::weak_ptr<Connection> weak = conn;
    monitor_->watch(conn->fd(), [weak] {
      if (auto c = weak.lock()) {
        c->broken = true;
        c->holds.mark_all_lost();
      }
    });
  }
  return conn;
}

std::shared_ptr<Connection> Pool::get_outside_cap(ConnClass cls) {
  if (auto c = pop_idle(cls)) return c;
  auto own = std::make_shared<Slots>(1);
  own->take(std::chrono::steady_clock::now());
  return Connection::open(options_, cls, std::move(own), &behind_proxy_);
}

void Pool::put(std::shared_ptr<Connection> conn) noexcept {
  if (!conn || conn->broken || !conn->counted_by(*slots_)) return;
  try {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(conn));
  } catch (...) {
  }
}

}  // namespace dlock::mysql
