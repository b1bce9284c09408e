// Status and Result<T>: error values for everything that can fail at run time (I/O, config,
// communication). Broken invariants (bugs) use TS_CHECK from check.h instead.
#pragma once
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode { ok, invalid_argument, not_found, io_error, corrupt_data, comm_error, timeout, internal };

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt_data: <message>"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::io_error, std::move(m)}; }
inline Status corrupt_data(std::string m) { return {StatusCode::corrupt_data, std::move(m)}; }
inline Status comm_error(std::string m) { return {StatusCode::comm_error, std::move(m)}; }
inline Status timeout_error(std::string m) { return {StatusCode::timeout, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::internal, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {
    if (std::get<Status>(v_).ok()) std::abort();  // an ok Status carries no value: a bug
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status ok_status;
    return ok() ? ok_status : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tessera

#define TS_CONCAT_INNER(a, b) a##b
#define TS_CONCAT(a, b) TS_CONCAT_INNER(a, b)

#define TS_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::tessera::Status ts_status_ = (expr);       \
    if (!ts_status_.ok()) return ts_status_;     \
  } while (0)

#define TS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define TS_ASSIGN_OR_RETURN(lhs, expr) TS_ASSIGN_OR_RETURN_IMPL(TS_CONCAT(ts_result_, __LINE__), lhs, expr)
