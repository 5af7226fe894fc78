// Counting allocator of the real runtime: every tensor the runtime owns is a Buf<T> tagged with
// a memory category (weights, gradients, optimizer states, activations, communication buffers),
// so a run can report its current and peak bytes per category, as the memory model predicts.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "core/plan_ir.h"

namespace monarch::realrt {

inline constexpr int kNumMemCategories = 5;

// Bytes held now and at most so far, per category and in total (process-wide, one thread).
struct MemoryCounters {
  std::array<int64_t, kNumMemCategories> current_bytes{};
  std::array<int64_t, kNumMemCategories> peak_bytes{};
  int64_t current_total_bytes = 0;
  int64_t peak_total_bytes = 0;
  // Category breakdown at the moment the total peaked.
  std::array<int64_t, kNumMemCategories> at_peak_bytes{};
};

MemoryCounters& memory_counters();
void reset_memory_peaks();  // peaks := current (e.g. after initialisation)
void count_alloc(MemCategory category, int64_t bytes);
void count_free(MemCategory category, int64_t bytes);

// An owned, zero-initialised array of T counted under one category.
template <typename T>
class Buf {
 public:
  Buf() = default;
  Buf(int64_t n, MemCategory category) : n_(n), category_(category) {
    assert(n >= 0);
    if (n_ > 0) {
      data_.reset(new T[static_cast<size_t>(n_)]());
      count_alloc(category_, bytes());
    }
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept { *this = std::move(o); }
  Buf& operator=(Buf&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::move(o.data_);
      n_ = std::exchange(o.n_, 0);
      category_ = o.category_;
    }
    return *this;
  }
  ~Buf() { release(); }

  void release() {
    if (data_) count_free(category_, bytes());
    data_.reset();
    n_ = 0;
  }
  void zero() {
    if (n_ > 0) std::memset(data_.get(), 0, static_cast<size_t>(bytes()));
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }
  int64_t size() const { return n_; }
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(T)); }
  bool empty() const { return n_ == 0; }
  MemCategory category() const { return category_; }

 private:
  std::unique_ptr<T[]> data_;
  int64_t n_ = 0;
  MemCategory category_ = MemCategory::kActivations;
};

}  // namespace monarch::realrt
