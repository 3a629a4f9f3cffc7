// One buyer of the inventory example (see demo.sh): each purchase takes the lock, reads the
// stock count, and if an item is left writes count-1 and appends an order line. Many of
// these run at once; the lock keeps them from overselling.
//
//   stock_deduct --uri file:///tmp/locks [--name inventory] [--purchases 5] [--think 5ms]
//                STOCK_FILE ORDERS_FILE
//
// STOCK_FILE holds "COUNT LAST_TOKEN". LAST_TOKEN is the fencing check a real resource
// would do: a write whose token is not larger than the last accepted one is refused.
// Exit status: 0 done (also when sold out), 1 error, 2 a write was refused as stale.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "dlock/dlock.h"

namespace {

struct Stock {
  long count = 0;
  std::uint64_t last_token = 0;
};

Stock read_stock(const std::string& path) {
  Stock s;
  std::ifstream in(path);
  if (!(in >> s.count)) throw std::runtime_error("cannot read a count from " + path);
  in >> s.last_token;
  return s;
}

// Replaces the file in one rename, so a reader never sees half a number.
void write_stock(const std::string& path, const Stock& s) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::ofstream(tmp) << s.count << ' ' << s.last_token << '\n';
  std::filesystem::rename(tmp, path);
}

struct Args {
  std::string uri = "mem://", name = "inventory", stock, orders;
  int purchases = 1;
  std::chrono::milliseconds think{0};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--uri") a.uri = value();
    else if (arg == "--name") a.name = value();
    else if (arg == "--purchases") a.purchases = std::stoi(value());
    else if (arg == "--think") a.think = dlock::parse_duration(value());
    else if (a.stock.empty()) a.stock = arg;
    else if (a.orders.empty()) a.orders = arg;
    else throw std::runtime_error("unexpected argument " + arg);
  }
  if (a.orders.empty()) throw std::runtime_error("usage: stock_deduct [--uri U] [--name N] [--purchases K] "
                                                 "[--think D] STOCK_FILE ORDERS_FILE");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args = parse(argc, argv);
    auto locks = dlock::open(args.uri);
    for (int i = 0; i < args.purchases; ++i) {
      dlock::Lease lease = locks->acquire(args.name, dlock::LockMode::exclusive,
                                          dlock::Wait::for_duration(std::chrono::seconds(60)));
      Stock stock = read_stock(args.stock);
      if (stock.count <= 0) return 0;  // sold out; the lease releases itself
      const std::uint64_t token = lease.fencing_token();
      if (token <= stock.last_token) {
        std::cerr << "stock_deduct: stale token " << token << " <= " << stock.last_token << ": refused\n";
        return 2;
      }
      std::this_thread::sleep_for(args.think);  // the work done while holding the lock
      if (lease.lost_token().stop_requested()) {  // never write without the lock
        std::cerr << "stock_deduct: lock lost before writing; purchase abandoned\n";
        continue;
      }
      write_stock(args.stock, {stock.count - 1, token});
      std::ofstream(args.orders, std::ios::app)
          << "order " << ::getpid() << " got item " << stock.count << " token " << token << "\n";
      lease.release();
    }
    return 0;
  } catch (const std::exception& e) {  // dlock::Error (unavailable, timed_out, …) or I/O
    std::cerr << "stock_deduct: " << e.what() << "\n";
    return 1;
  }
}
