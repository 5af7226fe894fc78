// Errors that users can cause are returned as values: a list of problems, each naming where
// (a JSON path such as /cluster/num_gpus, or an option such as --set) and what is wrong.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace monarch {

struct Problem {
  std::string where;    // JSON path ("/model/hidden_size") or option ("--top-k")
  std::string message;  // "found -4, expected a positive integer"

  std::string to_string() const { return where.empty() ? message : where + ": " + message; }
};

using Problems = std::vector<Problem>;

// A value or the problems that prevented it.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose
  Expected(Problems problems) : v_(std::move(problems)) {}  // NOLINT
  static Expected fail(std::string where, std::string message) {
    return Expected(Problems{Problem{std::move(where), std::move(message)}});
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const Problems& problems() const { return std::get<Problems>(v_); }

 private:
  std::variant<T, Problems> v_;
};

}  // namespace monarch
