// Private to the scenario reader (core/scenario_io_*.cc): the value readers that report
// problems with their JSON path, and the section readers each file defines. Not installed and
// not included outside core/scenario_io*.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/presets.h"  // closest_name
#include "core/scenario_io.h"

namespace monarch::scenario_io_detail {

using nlohmann::json;

std::string join(const std::vector<std::string>& v, const char* sep = ", ");
std::string type_name(const json& v);
// The value as the user wrote it, short enough for one line.
std::string show(const json& v);
std::string fmt_int(int64_t v);
std::string fmt_num(double v);

class Ctx {
 public:
  void add(const std::string& where, const std::string& message) { problems_.push_back({where, message}); }
  void found(const std::string& where, const json& v, const std::string& expected) {
    add(where, "found " + show(v) + ", expected " + expected);
  }
  Problems& problems() { return problems_; }
  size_t count() const { return problems_.size(); }

 private:
  Problems problems_;
};

// Reads the keys of one JSON object; finish() reports the keys nobody asked for.
class Obj {
 public:
  Obj(Ctx& ctx, const json* j, std::string path, std::vector<std::string> known)
      : ctx_(ctx), j_(j), path_(std::move(path)), known_(std::move(known)) {}

  bool present() const { return j_ != nullptr; }
  const std::string& path() const { return path_; }
  std::string at(const std::string& key) const { return path_ + "/" + key; }
  const json* get(const std::string& key) {
    if (!j_) return nullptr;
    auto it = j_->find(key);
    if (it == j_->end()) return nullptr;
    return &*it;
  }
  bool has(const std::string& key) const { return j_ && j_->contains(key); }

  void finish() {
    if (!j_) return;
    for (auto it = j_->begin(); it != j_->end(); ++it) {
      if (std::find(known_.begin(), known_.end(), it.key()) != known_.end()) continue;
      std::string msg = "unknown key";
      std::string near = closest_name(it.key(), known_);
      if (!near.empty()) msg += "; did you mean \"" + near + "\"?";
      else msg += "; expected one of: " + join(known_);
      ctx_.add(at(it.key()), msg);
    }
  }

 private:
  Ctx& ctx_;
  const json* j_;
  std::string path_;
  std::vector<std::string> known_;
};

// A section that must be an object when present.
const json* section(Ctx& ctx, const json* v, const std::string& path);

std::string int_range(int64_t lo, int64_t hi);

// Integers: JSON integers, or numbers with no fraction (1e3). Range checked on the double
// first, so 1e30 never reaches an int64.
std::optional<int64_t> to_int(Ctx& ctx, const json& v, const std::string& where, int64_t lo, int64_t hi,
                              const std::string& what = "");
std::optional<int64_t> get_int(Ctx& ctx, Obj& o, const std::string& key, int64_t lo, int64_t hi,
                               const std::string& what = "");
// Numbers: lo_open means the value must be strictly greater than lo.
std::optional<double> to_num(Ctx& ctx, const json& v, const std::string& where, double lo, double hi,
                             bool lo_open);
std::optional<double> get_num(Ctx& ctx, Obj& o, const std::string& key, double lo, double hi, bool lo_open);
std::optional<bool> get_bool(Ctx& ctx, Obj& o, const std::string& key);
std::optional<std::string> to_str(Ctx& ctx, const json& v, const std::string& where);
std::optional<std::string> get_str(Ctx& ctx, Obj& o, const std::string& key);

template <typename E>
std::optional<E> to_enum(Ctx& ctx, const json& v, const std::string& where, const std::vector<E>& values) {
  std::vector<std::string> names;
  for (E e : values) names.push_back(to_string(e));
  std::string expected = "one of " + join(names);
  if (!v.is_string()) {
    ctx.found(where, v, expected);
    return std::nullopt;
  }
  const std::string s = v.get<std::string>();
  for (E e : values)
    if (s == to_string(e)) return e;
  std::string near = closest_name(s, names);
  ctx.add(where, "found " + show(v) + ", expected " + expected + (near.empty() ? "" : " (did you mean \"" + near + "\"?)"));
  return std::nullopt;
}

template <typename E>
std::optional<E> get_enum(Ctx& ctx, Obj& o, const std::string& key, const std::vector<E>& values) {
  const json* v = o.get(key);
  if (!v) return std::nullopt;
  return to_enum(ctx, *v, o.at(key), values);
}

inline const std::vector<Architecture> kArchitectures = {Architecture::kGpt, Architecture::kLlama, Architecture::kDlrm};
inline const std::vector<Precision> kPrecisions = {Precision::kFp32, Precision::kBf16, Precision::kFp16, Precision::kFp8};
inline const std::vector<Optimizer> kOptimizers = {Optimizer::kAdam, Optimizer::kSgd};
inline const std::vector<Topology> kTopologies = {Topology::kFatTree, Topology::kRailOptimized, Topology::kStar};
inline const std::vector<Schedule> kSchedules = {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved};
inline const std::vector<Recompute> kRecomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
inline const std::vector<Objective> kObjectives = {Objective::kIterationTime, Objective::kMemory, Objective::kTimeToTrain};
inline const std::vector<RecoveryMode> kRecoveryModes = {RecoveryMode::kFullRestart, RecoveryMode::kReplica};
inline const std::vector<Backend> kBackends = {Backend::kAnalytical, Backend::kSimgrid, Backend::kRealCpu, Backend::kRealGpu};
inline const std::vector<Activation> kActivations = {Activation::kGelu, Activation::kSwiglu, Activation::kSquaredRelu};
inline const std::vector<AttentionKernel> kAttentionKernels = {AttentionKernel::kFlash, AttentionKernel::kMaterialized,
                                                               AttentionKernel::kFlash1, AttentionKernel::kFlash1Triton,
                                                               AttentionKernel::kFlash2};
inline const std::vector<Framework> kFrameworks = {Framework::kMegatron, Framework::kDeepspeed, Framework::kTorchtitan};
inline const std::vector<Fp8Recipe> kFp8Recipes = {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kMxfp8,
                                                   Fp8Recipe::kBlockwise};

// A file named by the scenario (or the scenario itself), read with a size bound.
std::optional<std::string> read_text_file(Ctx& ctx, const std::string& path, const std::string& where,
                                          const std::string& what);

// The sections, one reader each (scenario_io_model.cc, _cluster.cc, _parallelism.cc,
// _training.cc, _reliability.cc).
void read_model(Ctx& ctx, const json* mj, const std::string& base_dir, ModelConfig& m);
void read_cluster(Ctx& ctx, const json* cj, const std::string& base_dir, ClusterConfig& c, bool& nodes_ok);
void read_parallelism(Ctx& ctx, const json* pj, ParallelismConstraints& p);
void read_training(Ctx& ctx, const json* tj, TrainingConfig& t, std::optional<double>& capacity_factor);
void read_search(Ctx& ctx, const json* sj, SearchConfig& s);
void read_backends(Ctx& ctx, const json* bj, std::vector<Backend>& out);
void read_whatif(Ctx& ctx, const json* wj, const ClusterConfig& c, bool nodes_ok, WhatIf& w);
void read_reliability(Ctx& ctx, const json* rj, Scenario& s);
json reliability_to_json(const ReliabilityConfig& r);

// Keys of `parallelism` that name the same thing as `key` (itself excluded).
std::vector<std::string> alias_siblings(const std::string& key);
// The checks that span sections (degrees against the cluster and the model, layer splits,
// framework pins), after every section was read.
void cross_check(Ctx& ctx, const json* pj, Scenario& s);

// Applies one --set override; returns the JSON pointer it set, or "" (problem recorded).
std::string apply_override(Ctx& ctx, json& root, const std::string& ov);

}  // namespace monarch::scenario_io_detail
