#include "realrt/sweep_mpi.h"

#include <mpi.h>

#include <cstdio>
#include <limits>

namespace monarch::realrt {
namespace {

constexpr int kTagPoint = 1;    // rank 0 -> worker: int64 point index (-1: stop)
constexpr int kTagMessage = 2;  // worker -> rank 0: the outcome message (bytes)

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

}  // namespace

// The transport over MPI_COMM_WORLD.
class MpiTransport final : public SweepTransport {
 public:
  MpiTransport() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiTransport() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Problems send_point(int worker, int64_t index) override;
  Expected<std::optional<std::pair<int, std::string>>> poll_message() override;
  Expected<int64_t> receive_point() override;
  Problems send_message(const std::string& text) override;

 private:
  int rank_ = 0;
  int size_ = 1;
};

Problems MpiTransport::send_point(int worker, int64_t index) {
  const long long v = index;
  if (const int rc = MPI_Send(&v, 1, MPI_LONG_LONG, worker, kTagPoint, MPI_COMM_WORLD); rc != MPI_SUCCESS)
    return {{"mpirun", "sending a point to rank " + std::to_string(worker) + " failed: " + mpi_error(rc)}};
  return {};
}

Expected<std::optional<std::pair<int, std::string>>> MpiTransport::poll_message() {
  using Out = std::optional<std::pair<int, std::string>>;
  int ready = 0;
  MPI_Status status;
  if (const int rc = MPI_Iprobe(MPI_ANY_SOURCE, kTagMessage, MPI_COMM_WORLD, &ready, &status); rc != MPI_SUCCESS)
    return Expected<Out>::fail("mpirun", "probing for worker messages failed: " + mpi_error(rc));
  if (!ready) return Out();
  int bytes = 0;
  MPI_Get_count(&status, MPI_CHAR, &bytes);
  std::string text(static_cast<size_t>(bytes), '\0');
  if (const int rc = MPI_Recv(text.data(), bytes, MPI_CHAR, status.MPI_SOURCE, kTagMessage, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE);
      rc != MPI_SUCCESS)
    return Expected<Out>::fail("mpirun", "receiving from rank " + std::to_string(status.MPI_SOURCE) + " failed: " + mpi_error(rc));
  return Out(std::make_pair(status.MPI_SOURCE, std::move(text)));
}

Expected<int64_t> MpiTransport::receive_point() {
  long long v = -1;
  if (const int rc = MPI_Recv(&v, 1, MPI_LONG_LONG, 0, kTagPoint, MPI_COMM_WORLD, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
    return Expected<int64_t>::fail("mpirun", "receiving a point from rank 0 failed: " + mpi_error(rc));
  return static_cast<int64_t>(v);
}

Problems MpiTransport::send_message(const std::string& text) {
  if (text.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return {{"mpirun", "a point's outcome of " + std::to_string(text.size()) + " bytes exceeds one MPI message"}};
  if (const int rc = MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0, kTagMessage, MPI_COMM_WORLD);
      rc != MPI_SUCCESS)
    return {{"mpirun", "sending a point's outcome to rank 0 failed: " + mpi_error(rc)}};
  return {};
}

Expected<std::unique_ptr<SweepTransport>> init_mpi_transport() {
  int provided = 0;
  if (const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided); rc != MPI_SUCCESS)
    return Expected<std::unique_ptr<SweepTransport>>::fail("mpirun", "MPI_Init failed: " + mpi_error(rc));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::unique_ptr<SweepTransport>(new MpiTransport());
}

}  // namespace monarch::realrt
