// The file:// registrar: opens a FileBackend for dlock::open("file:///…").
// The directory is created (mode 0700, parents too) when missing.
#include <sys/stat.h>

#include <cerrno>
#include <memory>

#include "dlock/error.h"
#include "dlock/open.h"
#include "dlock/spi/backend_provider.h"
#include "dlock/spi/registrar.h"
#include "dlock/uri.h"
#include "errors.h"
#include "file_backend.h"
#include "lock_file.h"
#include "options.h"

namespace dlock::file {
namespace {

std::shared_ptr<ILockProvider> open_file_provider(const Uri& uri) {
  FileConfig config = parse_options(uri);
  ensure_directory(config.dir);
  struct stat st {};
  if (::stat(config.dir.c_str(), &st) != 0) throw sys_error("stat", config.dir, errno);
  if (!S_ISDIR(st.st_mode)) {
    throw Error(ErrorCode::invalid_argument,
                "file:// URI " + uri.redacted() + ": " + config.dir + " is not a directory");
  }
  auto backend = std::make_shared<FileBackend>(std::move(config));
  return spi::make_provider(std::move(backend), uri.redacted());
}

// Registered before main() through dlock::dlock's whole-archive link.
const bool registered = spi::register_schemes({"file"}, open_file_provider);

}  // namespace
}  // namespace dlock::file
