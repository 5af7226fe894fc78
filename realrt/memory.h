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

// Compute workspace: transient tensors of the forward and backward passes that are none of the
// memory model's five categories, as PyTorch autograd's temporaries are not: activation
// gradients, partial sums of a row-parallel linear before its reduction, one head's attention
// scratch. Counted apart (slot kWorkspaceSlot) and in the total, reported as workspace_bytes.
struct Workspace {};
inline constexpr Workspace kWorkspace{};
inline constexpr int kWorkspaceSlot = kNumMemCategories;
inline constexpr int kNumMemSlots = kNumMemCategories + 1;

// Bytes held now and at most so far, per category (then the workspace) and in total
// (process-wide, one thread).
struct MemoryCounters {
  std::array<int64_t, kNumMemSlots> current_bytes{};
  std::array<int64_t, kNumMemSlots> peak_bytes{};
  int64_t current_total_bytes = 0;
  int64_t peak_total_bytes = 0;
  // Breakdown at the moment the total peaked.
  std::array<int64_t, kNumMemSlots> at_peak_bytes{};
};

MemoryCounters& memory_counters();
void reset_memory_peaks();  // peaks := current (e.g. after initialisation)
void count_alloc(int slot, int64_t bytes);
void count_free(int slot, int64_t bytes);

// An owned, zero-initialised array of T counted under one category.
template <typename T>
class Buf {
 public:
  Buf() = default;
  Buf(int64_t n, MemCategory category) : Buf(n, static_cast<int>(category)) {}
  Buf(int64_t n, Workspace) : Buf(n, kWorkspaceSlot) {}
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept { *this = std::move(o); }
  Buf& operator=(Buf&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::move(o.data_);
      n_ = std::exchange(o.n_, 0);
      slot_ = o.slot_;
    }
    return *this;
  }
  ~Buf() { release(); }

  void release() {
    if (data_) count_free(slot_, bytes());
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
  bool is_workspace() const { return slot_ == kWorkspaceSlot; }

 private:
  Buf(int64_t n, int slot) : n_(n), slot_(slot) {
    assert(n >= 0);
    if (n_ > 0) {
      data_.reset(new T[static_cast<size_t>(n_)]());
      count_alloc(slot_, bytes());
    }
  }
  std::unique_ptr<T[]> data_;
  int64_t n_ = 0;
  int slot_ = static_cast<int>(MemCategory::kActivations);
};

}  // namespace monarch::realrt
