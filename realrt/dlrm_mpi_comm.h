// DlrmComm (realrt/dlrm_cpu.h) over MPI_COMM_WORLD: the CPU DLRM's all-to-all and all-reduce.
#pragma once

#include <mpi.h>

#include <vector>

#include "realrt/dlrm_cpu.h"

namespace monarch::realrt {

class MpiDlrmComm final : public DlrmComm {
 public:
  int rank() const override {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  int size() const override {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }
  // scount[i] / rcount[i] floats to / from rank i, packed in rank order.
  void alltoallv(const std::vector<float>& send, const std::vector<int>& scount, std::vector<float>& recv,
                 const std::vector<int>& rcount) override {
    std::vector<int> sdisp(scount.size(), 0), rdisp(rcount.size(), 0);
    for (size_t i = 1; i < scount.size(); ++i) {
      sdisp[i] = sdisp[i - 1] + scount[i - 1];
      rdisp[i] = rdisp[i - 1] + rcount[i - 1];
    }
    MPI_Alltoallv(send.data(), scount.data(), sdisp.data(), MPI_FLOAT, recv.data(), rcount.data(), rdisp.data(),
                  MPI_FLOAT, MPI_COMM_WORLD);
  }
  void allreduce_sum(std::vector<float>& data) override {
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
};

}  // namespace monarch::realrt
