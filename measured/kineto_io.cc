#include "measured/kineto_io.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <istream>
#include <map>
#include <regex>
#include <streambuf>

#include <nlohmann/json.hpp>

namespace monarch::measured {
namespace {

using nlohmann::json;

constexpr size_t kReadChunkBytes = size_t{1} << 20;      // one gzread per MiB
constexpr int64_t kProgressEveryBytes = int64_t{16} << 20;  // progress callback every 16 MiB of file
// A single trace event larger than this is not a profiler event (a runaway "args"): refused
// rather than held in memory.
constexpr size_t kMaxEventValues = 1u << 20;
// Kineto's "[memory]" events: args "Device Type" 0 = CPU, 1 = CUDA (c10::DeviceType).
constexpr int64_t kDeviceTypeCpu = 0;
constexpr int64_t kDeviceTypeCuda = 1;

// A streambuf over gzread: reads .gz and plain files alike (zlib passes plain files through).
class GzStreamBuf : public std::streambuf {
 public:
  explicit GzStreamBuf(gzFile f, std::function<void(int64_t)> on_read) : f_(f), on_read_(std::move(on_read)), buf_(kReadChunkBytes) {}
  bool failed() const { return failed_; }
  std::string error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(f_, buf_.data(), static_cast<unsigned>(buf_.size()));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f_, &code);
      failed_ = true;
      error_ = msg ? msg : "read error";
      return traits_type::eof();
    }
    if (n == 0) {
      int code = 0;
      const char* msg = gzerror(f_, &code);
      if (code != Z_OK && code != Z_STREAM_END) {
        failed_ = true;
        error_ = msg ? msg : "read error";
      }
      return traits_type::eof();
    }
    if (on_read_) on_read_(gzoffset(f_));
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile f_;
  std::function<void(int64_t)> on_read_;
  std::vector<char> buf_;
  bool failed_ = false;
  std::string error_;
};

double num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    try {
      return std::stod(it->get<std::string>());
    } catch (...) {
      return fallback;
    }
  }
  return fallback;
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return it->dump();
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string without_spaces(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

// Elements of all tensors in a record_shapes "Input Dims" entry ([[4, 8], [], ...]).
int64_t elements_of_dims(const json& dims) {
  int64_t total = 0;
  if (!dims.is_array()) return 0;
  for (const json& shape : dims) {
    if (!shape.is_array() || shape.empty()) continue;
    int64_t n = 1;
    bool ok = true;
    for (const json& d : shape) {
      if (!d.is_number_integer()) {
        ok = false;
        break;
      }
      n *= d.get<int64_t>();
    }
    // Nested lists (a list of tensors, as all_gather takes) are one level deeper.
    if (!ok) n = elements_of_dims(shape);
    total += n;
  }
  return total;
}

// Turns finished trace events into TraceReadout records.
class EventSink {
 public:
  explicit EventSink(TraceReadout& out) : out_(out) {}

  void event(const json& e) {
    ++out_.events_read;
    if (!e.is_object()) return;
    const std::string ph = str(e, "ph");
    const std::string name = str(e, "name");
    const std::string cat = lower(str(e, "cat"));
    auto args_it = e.find("args");
    static const json kEmpty = json::object();
    const json& args = args_it != e.end() && args_it->is_object() ? *args_it : kEmpty;
    const double ts = num(e, "ts"), dur = num(e, "dur");
    if (ph == "i" || ph == "I") {
      if (name == "[memory]") memory(args, ts);
      return;
    }
    if (ph != "X") return;
    if (starts_with(name, "ProfilerStep#") && cat.find("gpu") == std::string::npos) {
      try {
        out_.steps.push_back({std::stoll(name.substr(13)), ts, dur});
      } catch (...) {
      }
      return;
    }
    if (cat == "kernel") {
      out_.has_device = true;
      kernel(name, args, ts, dur);
    } else if (cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset") {
      out_.has_device = true;
      TraceActivity a{ts, dur, ActivityClass::kMemory, corr(args), -1};
      out_.activities.push_back(a);
    } else if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "runtime") {
      const int64_t c = corr(args);
      if (c >= 0) out_.launches.emplace_back(c, ts);
    } else if (cat == "cpu_op" || cat == "operator" || cat.empty() || cat == "user_annotation") {
      cpu_op(name, args, e, ts, dur);
    }
  }

  // After the whole file: a CPU-only trace's compute is its top-level CPU ops.
  void finish() {
    if (out_.has_device) {
      out_.activities.erase(std::remove_if(out_.activities.begin(), out_.activities.end(),
                                           [](const TraceActivity& a) { return a.correlation == kCpuActivity; }),
                            out_.activities.end());
      out_.memory = std::move(device_memory_);
    } else {
      for (TraceActivity& a : out_.activities)
        if (a.correlation == kCpuActivity) a.correlation = -1;
      out_.memory = std::move(cpu_memory_);
    }
  }

 private:
  // Marks CPU activities until finish() knows whether the trace has device work.
  static constexpr int64_t kCpuActivity = -2;

  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  static int64_t corr(const json& args) {
    auto it = args.find("correlation");
    return it != args.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
  }

  void memory(const json& args, double ts) {
    if (!args.contains("Total Allocated")) return;
    const int64_t type = static_cast<int64_t>(num(args, "Device Type", -1));
    TraceReadout::MemoryPoint p{ts, num(args, "Total Allocated")};
    if (type == kDeviceTypeCuda) device_memory_.push_back(p);
    else if (type == kDeviceTypeCpu) cpu_memory_.push_back(p);
  }

  void kernel(const std::string& name, const json& args, double ts, double dur) {
    TraceActivity a{ts, dur, ActivityClass::kCompute, corr(args), -1};
    if (starts_with(name, "ncclDevKernel_") || starts_with(name, "ncclKernel_") || starts_with(name, "nccl")) {
      a.cls = ActivityClass::kComm;
      CommOp op;
      const std::string coll = str(args, "Collective name");
      if (!parse_collective_name(coll.empty() ? name : coll, op)) parse_collective_name(name, op);
      const int64_t elem = dtype_bytes(str(args, "dtype"));
      const double in = num(args, "In msg nelems"), out = num(args, "Out msg nelems");
      const double nelems = !op.p2p && op.kind == CollectiveKind::kAllGather ? out : in;
      op.buffer_bytes = static_cast<int64_t>(nelems) * elem;
      op.group_size = static_cast<int32_t>(num(args, "Group size"));
      const std::string ranks = without_spaces(str(args, "Process Group Ranks"));
      op.group = !ranks.empty() ? ranks : str(args, "Process Group Description");
      if (op.group.empty()) op.group = str(args, "Process Group Name");
      a.comm_index = static_cast<int32_t>(out_.comm_ops.size());
      out_.comm_ops.push_back(std::move(op));
    }
    out_.activities.push_back(a);
  }

  // CPU-only traces: gloo collectives are communication; the outermost aten ops are compute
  // (nested ops are inside them, so the union is not double counted).
  void cpu_op(const std::string& name, const json& args, const json& e, double ts, double dur) {
    if (starts_with(name, "gloo:")) {
      CommOp op;
      if (!parse_collective_name(name.substr(5), op)) return;
      const json* dims = args.contains("Input Dims") ? &args["Input Dims"] : nullptr;
      const int64_t elem = args.contains("Input type") && args["Input type"].is_array() && !args["Input type"].empty() &&
                                   args["Input type"][0].is_string()
                               ? dtype_bytes(args["Input type"][0].get<std::string>())
                               : 4;
      op.buffer_bytes = dims ? elements_of_dims(*dims) * elem : 0;
      op.group = "pid" + str(e, "pid");
      TraceActivity a{ts, dur, ActivityClass::kComm, kCpuActivity, static_cast<int32_t>(out_.comm_ops.size())};
      out_.comm_ops.push_back(std::move(op));
      out_.activities.push_back(a);
      return;
    }
    if (starts_with(name, "aten::") || starts_with(name, "autograd::") ||
        (name.find("Backward") != std::string::npos && starts_with(name, "autograd")) || starts_with(name, "Optimizer.step")) {
      out_.activities.push_back(TraceActivity{ts, dur, ActivityClass::kCompute, kCpuActivity, -1});
    }
  }

  TraceReadout& out_;
  std::vector<TraceReadout::MemoryPoint> device_memory_, cpu_memory_;
};

// SAX handler: builds one trace event (or distributedInfo) at a time as a small json value and
// hands it on; everything else is parsed and dropped.
class TraceSax {
 public:
  TraceSax(TraceReadout& out, EventSink& sink) : out_(out), sink_(sink) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return value(json(v)); }
  bool string(std::string& v) { return value(json(std::move(v))); }
  bool binary(json::binary_t&) { return value(json()); }

  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) {
    if (depth_ == 0) out_.kineto_object = false;
    return open(json::array());
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (depth_ == 1) top_key_ = k;
    if (!stack_.empty()) key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    error_position_ = position;
    error_ = ex.what();
    return false;
  }

  const std::string& error() const { return error_; }
  size_t error_position() const { return error_position_; }
  bool saw_events() const { return saw_events_; }
  const json& distributed_info() const { return distributed_; }
  bool too_large() const { return too_large_; }

 private:
  // Depth at which a trace event object opens: inside the top-level array, or inside
  // "traceEvents" of the top-level object.
  bool at_event_depth() const {
    return (!out_.kineto_object && depth_ == 1) || (out_.kineto_object && depth_ == 2 && top_key_ == "traceEvents");
  }

  bool open(json v) {
    if (stack_.empty()) {
      if (at_event_depth() && v.is_object()) {
        building_ = Building::kEvent;
      } else if (out_.kineto_object && depth_ == 1 && top_key_ == "distributedInfo" && v.is_object()) {
        building_ = Building::kDistributed;
      } else {
        if (out_.kineto_object && depth_ == 1 && top_key_ == "traceEvents") saw_events_ = true;
        if (!out_.kineto_object && depth_ == 0) saw_events_ = true;
        ++depth_;
        return true;
      }
      root_ = std::move(v);
      stack_.push_back(&root_);
      values_ = 0;
      ++depth_;
      return true;
    }
    json* child = insert(std::move(v));
    if (!child) return false;
    stack_.push_back(child);
    ++depth_;
    return true;
  }

  bool close() {
    --depth_;
    if (stack_.empty()) return true;
    stack_.pop_back();
    if (stack_.empty()) {
      if (building_ == Building::kEvent) sink_.event(root_);
      else distributed_ = std::move(root_);
      root_ = json();
      building_ = Building::kNone;
    }
    return true;
  }

  bool value(json v) {
    if (stack_.empty()) return true;  // a scalar outside any event: not needed
    return insert(std::move(v)) != nullptr;
  }

  json* insert(json v) {
    if (++values_ > kMaxEventValues) {
      too_large_ = true;
      return nullptr;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }

  enum class Building { kNone, kEvent, kDistributed };
  TraceReadout& out_;
  EventSink& sink_;
  int depth_ = 0;
  std::string top_key_;
  std::string key_;
  json root_;
  std::vector<json*> stack_;
  Building building_ = Building::kNone;
  size_t values_ = 0;
  bool too_large_ = false;
  bool saw_events_ = false;
  json distributed_;
  std::string error_;
  size_t error_position_ = 0;
};

}  // namespace

int64_t dtype_bytes(const std::string& raw) {
  std::string n;
  for (char c : raw) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (starts_with(n, "c10::")) n = n.substr(5);
  if (n == "float" || n == "float32" || n == "int" || n == "int32" || n == "uint32") return 4;
  if (n == "bfloat16" || n == "half" || n == "float16" || n == "short" || n == "int16") return 2;
  if (n == "double" || n == "float64" || n == "long" || n == "int64" || n == "long int") return 8;
  if (n == "byte" || n == "char" || n == "bool" || n == "int8" || n == "uint8" || starts_with(n, "float8")) return 1;
  if (n == "unsigned char" || n == "signed char") return 1;
  return 0;
}

std::optional<int32_t> rank_from_file_name(const std::string& path) {
  static const std::regex kRank(R"((?:rank|worker)[-_]?(\d+))", std::regex::icase);
  const std::string name = std::filesystem::path(path).filename().string();
  std::smatch m;
  if (!std::regex_search(name, m, kRank)) return std::nullopt;
  try {
    return static_cast<int32_t>(std::stol(m[1].str()));
  } catch (...) {
    return std::nullopt;
  }
}

Expected<TraceReadout> read_kineto_trace(const std::string& path, const TraceReadOptions& options) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Expected<TraceReadout>::fail(path, "cannot read the trace: " + ec.message());
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return Expected<TraceReadout>::fail(path, "cannot open the trace");
  TraceReadout out;
  out.source = std::filesystem::path(path).filename().string();
  int64_t next_progress = kProgressEveryBytes;
  GzStreamBuf buf(f, [&](int64_t done) {
    if (options.progress && done >= next_progress) {
      options.progress(done, static_cast<int64_t>(size));
      next_progress = done + kProgressEveryBytes;
    }
  });
  std::istream in(&buf);
  EventSink sink(out);
  TraceSax sax(out, sink);
  const bool ok = json::sax_parse(in, &sax);
  gzclose(f);
  if (buf.failed()) return Expected<TraceReadout>::fail(path, "the file is damaged (" + buf.error() + ")");
  if (sax.too_large())
    return Expected<TraceReadout>::fail(path, "a trace event holds more than " + std::to_string(kMaxEventValues) +
                                                  " values; not a profiler trace");
  if (!ok) {
    return Expected<TraceReadout>::fail(
        path, "not a complete JSON trace: reading stopped at byte " + std::to_string(sax.error_position()) +
                  " of the uncompressed text (a truncated file?): " + sax.error());
  }
  if (!sax.saw_events())
    return Expected<TraceReadout>::fail(path, "not a Chrome trace: no \"traceEvents\" array and not a bare event array");
  sink.finish();
  const json& info = sax.distributed_info();
  if (info.is_object()) {
    out.rank = static_cast<int32_t>(num(info, "rank", -1));
    out.world_size = static_cast<int32_t>(num(info, "world_size", 0));
  }
  if (out.rank < 0) {
    if (auto r = rank_from_file_name(path)) out.rank = *r;
  }
  if (options.rank) out.rank = *options.rank;
  if (options.progress) options.progress(static_cast<int64_t>(size), static_cast<int64_t>(size));
  return out;
}

}  // namespace monarch::measured
