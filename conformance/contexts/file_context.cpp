// file:///dir: one lock file per name in a directory, shared by the processes of one host.
//
// Each case gets its own directory, /tmp/dlock-conf-XXXXXX/locks, so that a name escaping its
// directory ("../x") shows up as a stray entry next to "locks".
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include "framework/backend_context.h"

namespace dlock::conformance {
namespace {

namespace fs = std::filesystem;

class FileEnv final : public BackendEnv {
 public:
  FileEnv() {
    std::string tmpl = (fs::temp_directory_path() / "dlock-conf-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    root_ = tmpl;
    dir_ = root_ / "locks";
    fs::create_directory(dir_);
  }
  ~FileEnv() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string uri(const UriOptions&) const override { return "file://" + dir_.string() + "?fsync=false&lease=1s"; }

  // Replaces every lock file of the case's directory by a copy: the holder's descriptor now
  // guards an unlinked inode (its hold is lost), while the copy keeps the fencing counter, so
  // tokens still increase. Cases that sabotage hold one name, so "every" is "that one".
  void sabotage(std::string_view) override {
    int replaced = 0;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".lock") continue;
      const auto copy = root_ / "sabotage.tmp";
      fs::copy_file(entry.path(), copy, fs::copy_options::overwrite_existing);
      fs::rename(copy, entry.path());
      ++replaced;
    }
    if (replaced == 0) throw std::runtime_error("file saboteur: no lock file in " + dir_.string());
  }

  void check_namespace_contained() const override {
    for (const auto& entry : fs::directory_iterator(root_)) {
      if (entry.path() != dir_) {
        throw std::runtime_error("stray entry next to the lock directory: " + entry.path().string());
      }
    }
    for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
      if (!entry.is_regular_file()) {
        throw std::runtime_error("lock directory holds a non-file: " + entry.path().string());
      }
    }
  }

 private:
  fs::path root_;
  fs::path dir_;
};

BackendContext make() {
  BackendContext c;
  c.backend = "file";
  c.scheme = "file";
  c.claims.reentrant = true;
  c.claims.read_write = true;
  c.claims.fair = false;
  c.claims.fencing = true;
  c.claims.push_wakeup = true;
  c.claims.liveness = Liveness::session;
  c.claims.cross_process = true;
  c.short_lease = std::chrono::milliseconds(1000);
  c.tolerance = std::chrono::milliseconds(400);
  c.malformed_uris = {{"file://", "directory"},
                      {"file:///tmp/dlock-conf-bad?bogus=1", "bogus"},
                      {"file://host/tmp/x", "host"},
                      {"file://relative", "host"},
                      {"file:///tmp/dlock-conf-bad?poll=soon", "poll"}};
  c.make_env = [] { return std::make_unique<FileEnv>(); };
  return c;
}

const Registrar registrar(&make);

}  // namespace
}  // namespace dlock::conformance
