// Status / Result<T>: errors returned at boundaries (files, flags, requests).
// DSPARK_CHECK guards internal invariants only; a failure is a programmer bug and aborts,
// also in release builds.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace dspark {

// Process exit code for bad input (flags, files, prompts) of the command-line verbs and harnesses.
inline constexpr int kExitBadInput = 2;

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg) { Status s; s.msg_ = std::move(msg); s.failed_ = true; return s; }
  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return msg_; }

 private:
  bool failed_ = false;
  std::string msg_;
};

template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}             // NOLINT(implicit)
  Result(Status err) : v_(std::move(err)) {}            // NOLINT(implicit); must be an error
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() { return std::get<0>(v_); }
  Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }
  const std::string& message() const {
    static const std::string kEmpty;
    return is_ok() ? kEmpty : std::get<1>(v_).message();
  }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dspark

#define DSPARK_CHECK(cond)                                                              \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "internal error: %s:%d: check failed: %s\n", __FILE__,       \
                   __LINE__, #cond);                                                    \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

// Propagate an error Status from an expression returning Status.
#define DSPARK_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::dspark::Status _st = (expr);            \
    if (!_st.is_ok()) return _st;             \
  } while (0)
