// dlock's one error model.
//
// Infrastructure failures throw dlock::Error carrying an ErrorCode. "Not acquired within
// the wait" is not an error: try_… calls return an empty optional. Destructors never throw.
//
// Choosing a code (after absl::StatusCode):
//   invalid_argument  fix the call: bad URI, name, option or duration. Retrying cannot help.
//   unavailable       the server could not be reached or answered with a transient failure.
//                     Retrying later may help.
//   lock_lost         the lock was held but is no longer (lease expired, session ended, stolen).
//   not_held          an owner-checked operation found the lease no longer held.
//   unsupported       the backend does not offer this capability (see Capabilities).
//   would_deadlock    the call can never succeed as asked (a read→write upgrade).
//   timed_out         a blocking acquire() ran out of its wait.
//   cancelled         a blocking acquire() was cancelled through its stop_token.
//   internal          a bug or a reply the backend cannot make sense of.
//
// No message ever contains a password: URIs are printed redacted.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace dlock {

enum class ErrorCode {
  invalid_argument,
  unavailable,
  lock_lost,
  not_held,
  unsupported,
  would_deadlock,
  timed_out,
  cancelled,
  internal,
};

// The code's name as written above, e.g. "invalid_argument".
std::string_view to_string(ErrorCode code) noexcept;

// Thrown by every dlock call that fails. what() reads "<code>: <message>".
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);

  ErrorCode code() const noexcept { return code_; }
  // The message without the "<code>: " prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace dlock
