// SPDX-License-Identifier: MIT
//
// ProcessGroupMlap2p: a torch 1.13 c10d::ProcessGroup on libmlap2p's NCCL
// API (<nccl.h> from pkg-config mlap2p-nccl), host memory only.
//
// Two communicators per process group.  Collectives (and barrier) run in
// order on the group's progress thread (the group's host stream); a small
// one may run at once on the caller's thread when that stream is idle
// (see MLAP2P_TORCH_INLINE_BYTES in README.md), which keeps
// dist.all_reduce's latency close to the library's.  Point-to-point
// operations (send, recv, batch_isend_irecv) go to the p2p engine: a
// second communicator, split from the first when the group is made, and
// a thread that posts each one as library requests (mlap2p_nccl_ipost:
// ncclSend's channels and parts) the moment it arrives and progresses all of them together, so a recv
// posted before a send on every rank completes, as it does on Gloo; a
// thread in wait() on a send or recv does the engine's work itself while
// the engine's thread sleeps (p2pDrive), which saves two hand-offs.  The
// first message between two ranks connects them (a zero-byte exchange on
// the engine's library stream, which ncclCommAbort can interrupt); while
// it waits for the peer, the engine's other messages wait too.  Every
// Work completes with the result or with an exception naming this rank,
// the operation and the library's message (which names a dead or
// mismatched peer).  A Work that outlives its timeout aborts both
// communicators, as ProcessGroupNCCL does.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <nccl.h>
#include <mlap2p/dataplane.h>
#include <mlap2p/mlap2p.h>

namespace mlap2p_torch {

class ProcessGroupMlap2p;

class WorkMlap2p : public c10d::Work {
 public:
  using Fn = std::function<void(ncclComm_t)>;

  WorkMlap2p(ProcessGroupMlap2p* pg, int rank, c10d::OpType type,
             const char* name, uint64_t seq, std::chrono::milliseconds timeout,
             size_t bytes, std::vector<at::Tensor> outputs, Fn fn);

  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  void synchronize() override {}
  bool isCompleted() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  void abort() override;

  const char* name() const { return name_; }
  uint64_t seq() const { return seq_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  size_t bytes() const { return bytes_; }

 private:
  friend class ProcessGroupMlap2p;
  std::exception_ptr execute(ncclComm_t comm);  // fn_, errors caught
  void complete(std::exception_ptr err);

  ProcessGroupMlap2p* pg_;  // outlives its works (destructor drains)
  const char* name_;
  uint64_t seq_;
  std::chrono::milliseconds timeout_;
  size_t bytes_;
  std::vector<at::Tensor> outputs_;
  Fn fn_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_rank_ = -1;
  std::atomic<bool> done_{false};  // complete() has run (for the spin)
  bool p2p_ = false;  // a send or recv of the p2p engine (wait drives it)
  // A batch's sends and receives (endCoalescing): they end with it.
  std::vector<c10::intrusive_ptr<WorkMlap2p>> members_;
};

class ProcessGroupMlap2p : public c10d::ProcessGroup {
 public:
  // A new communicator: rank 0 creates the unique id and publishes it in
  // @store (a PrefixStore of the group, as ProcessGroupNCCL uses it); the
  // others read it there.
  ProcessGroupMlap2p(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                     int size, std::chrono::milliseconds timeout);
  // A child of @parent made by ncclCommSplit (color, key); collective over
  // every rank of @parent (those outside the group pass NCCL_SPLIT_NOCOLOR
  // through splitNoColor()).
  ProcessGroupMlap2p(ProcessGroupMlap2p& parent, int color, int key,
                     int rank, int size, std::chrono::milliseconds timeout);
  ~ProcessGroupMlap2p() override;

  const std::string getBackendName() const override { return "mlap2p"; }

  // batch_isend_irecv: the sends and receives in between are posted at
  // the end as one group (ncclGroupStart/End), so that they progress
  // together, as NCCL's batch does.
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts =
          c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& outputSplitSizes,
      std::vector<int64_t>& inputSplitSizes,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors,
                                      int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors,
                                      int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  // The ncclCommSplit of a rank outside a new group (run on this stream).
  void splitNoColor();
  // Abort the communicator: every queued and running operation fails with
  // @why.  Idempotent; later operations fail at once with the first reason.
  void abortComm(const std::string& why);
  // The library's version and how this group runs (for tests and logs).
  std::string describe() const;

  int inlineBytes() const { return inline_bytes_; }

 private:
  friend class WorkMlap2p;

  void start();
  c10::intrusive_ptr<WorkMlap2p> post(c10d::OpType type, const char* name,
                                      std::chrono::milliseconds timeout,
                                      size_t bytes,
                                      std::vector<at::Tensor> outputs,
                                      WorkMlap2p::Fn fn,
                                      std::vector<c10::intrusive_ptr<WorkMlap2p>>
                                          members = {});
  c10::intrusive_ptr<c10d::Work> p2p(bool send, const at::Tensor& t,
                                     int peer);
  // A send or recv for the p2p engine (its Work completes it).
  struct P2pOp {
    c10::intrusive_ptr<WorkMlap2p> w;
    bool send;
    at::Tensor t, buf;  // the tensor, and its dense stand-in
    int peer;
    std::vector<mlap2p_request*> reqs;  // once posted: one per part
    int status = 0;                     // the first error: 0 or -errno
  };
  P2pOp p2pOp(bool send, const at::Tensor& t, int peer);
  int p2pIssue(P2pOp& o);  // under pmu_: mlap2p_nccl_ipost
  bool p2pTest(P2pOp& o);  // under pmu_: true when o.reqs all ended
  std::string p2pWhy(const P2pOp& o, int err) const;
  void p2pPost(std::vector<P2pOp> ops);  // in order, all at once
  void p2pLoop();
  bool p2pBusy() const;
  bool p2pPass(std::unique_lock<std::mutex>& lock, std::vector<P2pOp>& done,
               bool& moved);
  void p2pFinish(std::vector<P2pOp>& done);
  bool p2pStep(std::vector<P2pOp>& done, std::string& why);
  void p2pDrive(WorkMlap2p& w,
                std::chrono::steady_clock::time_point deadline);
  void streamLoop();
  void watchdogLoop();
  ncclComm_t runSplit(int color, int key);
  std::chrono::milliseconds opTimeout(std::chrono::milliseconds t) const;
  [[noreturn]] void fail(const char* op, ncclResult_t r,
                         ncclComm_t comm) const;
  void check(const char* op, ncclResult_t r, ncclComm_t comm) const {
    if (r != ncclSuccess) fail(op, r, comm);
  }

  std::chrono::milliseconds timeout_;
  int inline_bytes_;
  int spin_us_;       // MLAP2P_TORCH_SPIN_US: stay awake this long
  uint64_t seq_ = 0;  // next operation number (caller side)
  // Between startCoalescing and endCoalescing (caller side): the batch.
  bool coalescing_ = false;
  std::vector<P2pOp> batch_;

  // Everything below is guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkMlap2p>> queue_;
  bool running_ = false;  // an operation holds the communicator
  bool sleeping_ = false;  // the stream waits on cv_
  std::atomic<int> queued_{0};  // queue_.size(), read without mu_
  WorkMlap2p* current_ = nullptr;
  std::chrono::steady_clock::time_point current_start_;
  bool stop_ = false;
  ncclComm_t comm_ = nullptr;
  std::exception_ptr broken_;  // why the communicator is gone
  std::string broken_why_;

  std::thread stream_;
  std::thread watchdog_;

  // The p2p engine.  Guarded by pmu_, which the engine holds whenever it
  // calls into p2p_, so that abortComm (which takes it) never frees the
  // communicator under a call; the connect runs on pstream_ instead.
  std::mutex pmu_;
  std::condition_variable pcv_;
  std::deque<P2pOp> pqueue_;  // posted by callers, not yet taken
  std::vector<P2pOp> pwaiting_;  // taken, waiting for a connect
  std::vector<P2pOp> pactive_;   // given to the library
  bool pconnecting_ = false;     // a connect runs on pstream_
  std::vector<int> ppending_;    // the peers it connects
  int pdrivers_ = 0;             // threads in p2pDrive (the engine sleeps)
  bool pstop_ = false;
  ncclComm_t p2p_ = nullptr;  // null once aborted
  cudaStream_t pstream_ = nullptr;
  std::vector<char> connected_;  // per peer (engine only)
  std::thread engine_;
};

}  // namespace mlap2p_torch
