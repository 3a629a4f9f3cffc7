// A fresh directory under /tmp for one test, removed with everything in it afterwards.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace dlock::file::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/dlock-file-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string uri(const std::string& query = "") const {
    return "file://" + path_ + (query.empty() ? "" : "?" + query);
  }

 private:
  std::string path_;
};

}  // namespace dlock::file::testing
