#include "gui/models/whatif_sweep.h"

#include <algorithm>
#include <cmath>

#include "core/presets.h"

namespace monarch::gui {
namespace {

// Continuous knobs step by this factor between points (bandwidth), oversubscription by its root.
constexpr double kGeometricStep = 2.0;
// Oversubscription never goes below a non-blocking fabric (1:1).
constexpr double kMinOversubscription = 1.0;

std::string number_label(double v, const char* unit) {
  QString text = v >= 100 || v == std::floor(v) ? QString::number(v, 'f', 0) : QString::number(v, 'g', 3);
  return (text + QLatin1Char(' ') + QLatin1String(unit)).toStdString();
}

int64_t model_parallel(const Plan& p) { return std::max<int64_t>(1, p.tp * p.pp * p.cp); }

// Doublings of `base` from base / 2^(points/2) on, as integers >= 1, keeping those `ok` accepts.
template <typename Ok>
std::vector<int64_t> doublings(int64_t base, int points, Ok ok) {
  std::vector<int64_t> out;
  if (base <= 0) return out;
  const int below = points / 2;
  for (int k = -below; static_cast<int>(out.size()) < points && k <= points; ++k) {
    const double v = static_cast<double>(base) * std::pow(2.0, k);
    if (v < 1 || v != std::floor(v) || v > 1e9) continue;
    const auto n = static_cast<int64_t>(v);
    if (ok(n)) out.push_back(n);
  }
  return out;
}

}  // namespace

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> kAll{Knob::kInterNodeBandwidth, Knob::kGpuCountStrong, Knob::kGpuCountWeak,
                                      Knob::kMicroBatch,         Knob::kGlobalBatch,    Knob::kSeqLength,
                                      Knob::kOversubscription,   Knob::kGpuKind};
  return kAll;
}

QString knob_name(Knob k) {
  switch (k) {
    case Knob::kInterNodeBandwidth: return QStringLiteral("inter-node bandwidth (GB/s per NIC)");
    case Knob::kGpuCountStrong: return QStringLiteral("GPU count, strong scaling (global batch fixed)");
    case Knob::kGpuCountWeak: return QStringLiteral("GPU count, weak scaling (global batch per GPU fixed)");
    case Knob::kMicroBatch: return QStringLiteral("micro-batch size");
    case Knob::kGlobalBatch: return QStringLiteral("global batch (sequences)");
    case Knob::kSeqLength: return QStringLiteral("sequence length (tokens)");
    case Knob::kOversubscription: return QStringLiteral("fabric oversubscription (x:1)");
    case Knob::kGpuKind: return QStringLiteral("GPU kind");
  }
  return {};
}

bool knob_is_geometric(Knob k) { return k != Knob::kOversubscription && k != Knob::kGpuKind; }
bool knob_is_categorical(Knob k) { return k == Knob::kGpuKind; }

double knob_value(Knob k, const Scenario& s, const Plan& p) {
  switch (k) {
    case Knob::kInterNodeBandwidth: return s.cluster.inter_node.bandwidth_GBps;
    case Knob::kGpuCountStrong:
    case Knob::kGpuCountWeak: return static_cast<double>(s.cluster.num_gpus);
    case Knob::kMicroBatch: return static_cast<double>(p.micro_batch_size);
    case Knob::kGlobalBatch: return static_cast<double>(s.training.global_batch_size);
    case Knob::kSeqLength: return static_cast<double>(s.model.seq_length);
    case Knob::kOversubscription: return s.cluster.oversubscription;
    case Knob::kGpuKind: {
      const std::vector<GpuPreset>& presets = gpu_presets();
      for (size_t i = 0; i < presets.size(); ++i)
        if (presets[i].spec.name == s.cluster.gpu.name) return static_cast<double>(i);
      return -1;
    }
  }
  return 0;
}

std::vector<KnobValue> sweep_values(Knob k, const Scenario& s, const Plan& p, int points) {
  points = std::max(points, 2);
  std::vector<KnobValue> out;
  const int64_t gbs = s.training.global_batch_size;
  const int64_t mp = model_parallel(p);
  switch (k) {
    case Knob::kInterNodeBandwidth: {
      const double base = s.cluster.inter_node.bandwidth_GBps;
      for (int i = 0; i < points && base > 0; ++i) {
        const double v = base * std::pow(kGeometricStep, i - points / 2);
        out.push_back({v, number_label(v, "GB/s")});
      }
      break;
    }
    case Knob::kOversubscription:
      for (int i = 0; i < points; ++i) {
        const double v = kMinOversubscription * std::pow(std::sqrt(kGeometricStep), i);
        out.push_back({v, number_label(v, ":1")});
      }
      break;
    case Knob::kGpuCountStrong:
      for (int64_t n : doublings(s.cluster.num_gpus, points, [&](int64_t n) {
             return n % mp == 0 && gbs % (p.micro_batch_size * (n / mp)) == 0;
           }))
        out.push_back({static_cast<double>(n), std::to_string(n) + " GPUs"});
      break;
    case Knob::kGpuCountWeak:
      for (int64_t n : doublings(s.cluster.num_gpus, points, [&](int64_t n) {
             return n % mp == 0 && (gbs * n) % s.cluster.num_gpus == 0;
           }))
        out.push_back({static_cast<double>(n), std::to_string(n) + " GPUs"});
      break;
    case Knob::kMicroBatch: {
      const int64_t per_replica = p.dp > 0 ? gbs / p.dp : 0;
      for (int64_t m = 1; m <= per_replica && static_cast<int>(out.size()) < 2 * points; m *= 2)
        if (per_replica % m == 0) out.push_back({static_cast<double>(m), "mbs " + std::to_string(m)});
      break;
    }
    case Knob::kGlobalBatch:
      for (int64_t b : doublings(gbs, points, [&](int64_t b) { return b % (p.micro_batch_size * p.dp) == 0; }))
        out.push_back({static_cast<double>(b), std::to_string(b) + " sequences"});
      break;
    case Knob::kSeqLength:
      for (int64_t L : doublings(s.model.seq_length, points, [](int64_t L) { return L >= 128; }))
        out.push_back({static_cast<double>(L), std::to_string(L) + " tokens"});
      break;
    case Knob::kGpuKind: {
      const std::vector<GpuPreset>& presets = gpu_presets();
      for (size_t i = 0; i < presets.size(); ++i) out.push_back({static_cast<double>(i), presets[i].spec.name});
      break;
    }
  }
  return out;
}

Expected<SweepInput> apply_knob(Knob k, const KnobValue& v, const Scenario& scenario, const Plan& plan) {
  SweepInput in{scenario, plan};
  Scenario& s = in.scenario;
  Plan& p = in.plan;
  const auto n = static_cast<int64_t>(std::llround(v.x));
  switch (k) {
    case Knob::kInterNodeBandwidth: s.cluster.inter_node.bandwidth_GBps = v.x; break;
    case Knob::kOversubscription: s.cluster.oversubscription = v.x; break;
    case Knob::kGpuCountStrong:
    case Knob::kGpuCountWeak: {
      const int64_t mp = model_parallel(plan);
      if (n <= 0 || n % mp != 0)
        return Expected<SweepInput>::fail("/cluster/num_gpus", std::to_string(n) + " GPUs is not a multiple of tp x pp x cp = " +
                                                                   std::to_string(mp) + " of this plan");
      if (k == Knob::kGpuCountWeak) {
        const int64_t scaled = scenario.training.global_batch_size * n;
        if (scenario.cluster.num_gpus <= 0 || scaled % scenario.cluster.num_gpus != 0)
          return Expected<SweepInput>::fail("/training/global_batch_size", "the global batch does not scale to " + std::to_string(n) + " GPUs");
        s.training.global_batch_size = scaled / scenario.cluster.num_gpus;
      }
      s.cluster.num_gpus = n;
      p.dp = n / mp;
      break;
    }
    case Knob::kMicroBatch:
      p.micro_batch_size = n;
      s.training.micro_batch_size = n;
      break;
    case Knob::kGlobalBatch: s.training.global_batch_size = n; break;
    case Knob::kSeqLength: s.model.seq_length = n; break;
    case Knob::kGpuKind: {
      const GpuPreset* preset = find_gpu_preset(v.label);
      if (!preset) return Expected<SweepInput>::fail("/cluster/gpu", "no GPU preset named " + v.label);
      // The GPU and its NVLink come with the kind; the node size and the network stay.
      s.cluster.gpu = preset->spec;
      s.cluster.intra_node = preset->default_intra_node;
      break;
    }
  }
  if (p.micro_batch_size <= 0 || p.dp <= 0 || s.training.global_batch_size % (p.micro_batch_size * p.dp) != 0)
    return Expected<SweepInput>::fail("/training/global_batch_size",
                                      "global batch " + std::to_string(s.training.global_batch_size) +
                                          " does not split into micro-batches of " + std::to_string(p.micro_batch_size) +
                                          " over " + std::to_string(p.dp) + " data-parallel ranks");
  return in;
}

QString curve_metric_name(CurveMetric m) {
  switch (m) {
    case CurveMetric::kIterationTime: return QStringLiteral("iteration time (s)");
    case CurveMetric::kMfu: return QStringLiteral("MFU (%)");
    case CurveMetric::kPeakMemory: return QStringLiteral("peak memory per GPU (GiB)");
    case CurveMetric::kTokensPerS: return QStringLiteral("tokens/s");
  }
  return {};
}

double curve_value(const CurveMetrics& c, CurveMetric m) {
  switch (m) {
    case CurveMetric::kIterationTime: return c.iteration_time_s;
    case CurveMetric::kMfu: return c.mfu * 100;
    case CurveMetric::kPeakMemory: return c.peak_memory_gib;
    case CurveMetric::kTokensPerS: return c.tokens_per_s;
  }
  return 0;
}

CurveRanges curve_ranges(const std::vector<SweepPoint>& points, CurveMetric m) {
  CurveRanges r;
  bool any_x = false;
  double top = 0;
  for (const SweepPoint& p : points) {
    r.x_min = any_x ? std::min(r.x_min, p.value.x) : p.value.x;
    r.x_max = any_x ? std::max(r.x_max, p.value.x) : p.value.x;
    any_x = true;
    for (const std::optional<CurveMetrics>* c : {&p.selected, &p.best, &p.simgrid})
      if (*c) top = std::max(top, curve_value(**c, m));
  }
  if (!any_x || r.x_max <= r.x_min) {
    r.x_min = any_x ? r.x_min - 0.5 : 0;
    r.x_max = any_x ? r.x_max + 0.5 : 1;
  }
  r.y_min = 0;
  r.y_max = top > 0 ? top * 1.1 : 1;
  return r;
}

}  // namespace monarch::gui
