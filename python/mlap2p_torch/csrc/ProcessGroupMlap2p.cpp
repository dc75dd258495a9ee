// SPDX-License-Identifier: MIT
//
// ProcessGroupMlap2p: see ProcessGroupMlap2p.hpp.
#include "ProcessGroupMlap2p.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace mlap2p_torch {

namespace {

using std::chrono::milliseconds;

// An error the library returned: after it the communicator is aborted.
struct LibraryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char* const kUidKey = "mlap2p_unique_id";

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  TORCH_CHECK(end && *end == '\0' && x >= 0 && x <= (1L << 30),
              "mlap2p: ", name, "='", v, "' is not a byte count");
  return static_cast<int>(x);
}

ncclDataType_t ncclType(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    default:
      TORCH_CHECK(false, "mlap2p: unsupported dtype ", t,
                  " (float32/64, float16, bfloat16, int8, uint8, int32, "
                  "int64, bool)");
  }
}

void checkTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "mlap2p: ", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "mlap2p: ", op,
              ": tensors must be on the CPU (got ", t.device(), ")");
  TORCH_CHECK(t.layout() == at::kStrided, "mlap2p: ", op,
              ": only dense (strided) tensors");
  (void)ncclType(t.scalar_type());
}

void checkOne(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "mlap2p: ", op,
              ": one tensor per process (got ", ts.size(), ")");
  checkTensor(ts[0], op);
}

void checkSame(const at::Tensor& a, const at::Tensor& ref, const char* op) {
  checkTensor(a, op);
  TORCH_CHECK(a.scalar_type() == ref.scalar_type(), "mlap2p: ", op,
              ": dtype ", a.scalar_type(), " differs from ",
              ref.scalar_type());
}

at::Tensor dense(const at::Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}

size_t nbytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

// Copies @buf back into @t when @buf was a contiguous stand-in.
void copyBack(at::Tensor& t, const at::Tensor& buf) {
  if (!buf.is_same(t)) t.copy_(buf.view(t.sizes()));
}

at::Tensor flatCat(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive pieces of @flat (from element @off) into @ts.
int64_t unpack(const at::Tensor& flat, int64_t off,
               std::vector<at::Tensor>& ts) {
  for (auto& t : ts) {
    const int64_t n = t.numel();
    t.copy_(flat.narrow(0, off, n).view(t.sizes()));
    off += n;
  }
  return off;
}

// The reduction a c10d ReduceOp asks for, as far as it can be told before
// the communicator is at hand (PREMUL_SUM needs the communicator).
struct Reduction {
  ncclRedOp_t op = ncclSum;
  bool premul = false;
  double factor = 0.0;
  at::Tensor factor_tensor;
  ncclDataType_t dt = ncclFloat32;
  at::ScalarType st = at::kFloat;
};

Reduction reduction(const c10d::ReduceOp& rop, at::ScalarType st,
                    const char* opname) {
  Reduction r;
  r.dt = ncclType(st);
  r.st = st;
  const bool isBool = st == at::kBool;
  switch (rop.op_) {
    case c10d::ReduceOp::SUM: r.op = isBool ? ncclMax : ncclSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? ncclMin : ncclProd; break;
    case c10d::ReduceOp::MIN: r.op = ncclMin; break;
    case c10d::ReduceOp::MAX: r.op = ncclMax; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "mlap2p: ", opname,
                  ": ReduceOp.AVG is not defined on bool");
      r.op = ncclAvg;
      break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
      // On bool (0/1 bytes) AND is MIN and OR is MAX; on other types NCCL
      // has no bitwise reduction and neither has libmlap2p.
      TORCH_CHECK(isBool, "mlap2p: ", opname,
                  ": ReduceOp.BAND/BOR only on bool tensors");
      r.op = rop.op_ == c10d::ReduceOp::BAND ? ncclMin : ncclMax;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(!isBool, "mlap2p: ", opname, ": PREMUL_SUM on bool");
      auto sup = c10::static_intrusive_pointer_cast<
          c10d::NCCLPreMulSumSupplement>(rop.supplement_);
      TORCH_CHECK(sup, "mlap2p: ", opname, ": PREMUL_SUM without a factor");
      r.premul = true;
      if (!sup->tensor_factors.empty()) {
        // torch 1.13 keeps one factor per device; this backend has one.
        const at::Tensor& f = sup->tensor_factors[0];
        TORCH_CHECK(sup->tensor_factors.size() == 1 && f.numel() == 1,
                    "mlap2p: ", opname,
                    ": PREMUL_SUM takes one factor of one element");
        r.factor_tensor = f.detach().cpu().to(st);
      } else {
        r.factor = sup->double_factor;
      }
      break;
    }
    default:
      TORCH_CHECK(false, "mlap2p: ", opname, ": ReduceOp ",
                  static_cast<int>(rop.op_), " is not supported");
  }
  return r;
}

// A PREMUL_SUM op created on the communicator for one call.
class ScopedOp {
 public:
  ScopedOp(const Reduction& r, ncclComm_t comm) : comm_(comm), op_(r.op) {
    if (!r.premul) return;
    at::Tensor s = r.factor_tensor.defined()
                       ? r.factor_tensor.contiguous()
                       : at::scalar_tensor(r.factor, at::TensorOptions().dtype(r.st));
    res_ = ncclRedOpCreatePreMulSum(&op_, s.data_ptr(), r.dt,
                                    ncclScalarHostImmediate, comm);
    created_ = res_ == ncclSuccess;
  }
  ~ScopedOp() {
    if (created_) (void)ncclRedOpDestroy(op_, comm_);
  }
  ncclResult_t result() const { return res_; }
  ncclRedOp_t op() const { return op_; }

 private:
  ncclComm_t comm_;
  ncclRedOp_t op_;
  ncclResult_t res_ = ncclSuccess;
  bool created_ = false;
};

// The host stream of every call: libmlap2p's NULL stream runs a call to
// completion before it returns; this group's progress thread is the
// stream the caller does not wait on.
constexpr cudaStream_t kStream = nullptr;

const char* orEmpty(const char* s) { return s ? s : ""; }

std::string msString(milliseconds t) {
  return std::to_string(t.count()) + " ms";
}

}  // namespace

// ---------------------------------------------------------------- Work

WorkMlap2p::WorkMlap2p(ProcessGroupMlap2p* pg, int rank, c10d::OpType type,
                       const char* name, uint64_t seq, milliseconds timeout,
                       size_t bytes, std::vector<at::Tensor> outputs, Fn fn)
    : c10d::Work(rank, type),
      pg_(pg),
      name_(name),
      seq_(seq),
      timeout_(timeout),
      bytes_(bytes),
      outputs_(std::move(outputs)),
      fn_(std::move(fn)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

bool WorkMlap2p::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

std::vector<at::Tensor> WorkMlap2p::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> WorkMlap2p::getFuture() {
  return future_;
}

int WorkMlap2p::sourceRank() const {
  TORCH_CHECK(source_rank_ >= 0, "mlap2p: sourceRank() only after recv");
  return source_rank_;
}

void WorkMlap2p::abort() {
  pg_->abortComm("mlap2p: rank " + std::to_string(pg_->getRank()) + ": " +
                 name_ + " #" + std::to_string(seq_) + " aborted by the user");
}

bool WorkMlap2p::wait(milliseconds timeout) {
  const milliseconds t = timeout == ::kNoTimeout ? timeout_ : timeout;
  const auto deadline = std::chrono::steady_clock::now() + t;
  if (done_.load(std::memory_order_acquire)) {
  } else if (p2p_) {
    pg_->p2pDrive(*this, deadline);
  } else if (pg_->spin_us_ > 0) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::microseconds(pg_->spin_us_);
    while (!done_.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [&] { return completed_; })) {
    lock.unlock();
    const std::string why = "mlap2p: rank " +
                            std::to_string(pg_->getRank()) + ": " + name_ +
                            " #" + std::to_string(seq_) +
                            " did not complete within " + msString(t) +
                            "; communicator aborted";
    pg_->abortComm(why);
    // The abort ends the library's waits; let the stream finish the call.
    lock.lock();
    cv_.wait_for(lock, std::chrono::seconds(30), [&] { return completed_; });
    throw std::runtime_error(why);
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WorkMlap2p::complete(std::exception_ptr err) {
  // The future first: DDP's reducer waits on it, wait() on the Work.
  if (err)
    future_->setError(err);
  else
    future_->markCompleted(c10::IValue(outputs_));
  fn_ = nullptr;  // drop the staging buffers the closure holds
  finish(err);
  done_.store(true, std::memory_order_release);
  for (auto& m : members_) m->complete(err);
  members_.clear();
}

// -------------------------------------------------------- ProcessGroup

ProcessGroupMlap2p::ProcessGroupMlap2p(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      timeout_(timeout),
      inline_bytes_(envInt("MLAP2P_TORCH_INLINE_BYTES", 65536)),
      spin_us_(envInt("MLAP2P_TORCH_SPIN_US", 50)) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0) {
    check("ncclGetUniqueId", ncclGetUniqueId(&id), nullptr);
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(kUidKey, std::vector<uint8_t>(p, p + sizeof(id)));
  } else {
    std::vector<uint8_t> v = store->get(kUidKey);
    TORCH_CHECK(v.size() == sizeof(id), "mlap2p: rank ", rank,
                ": the store's unique id has ", v.size(), " bytes, not ",
                sizeof(id));
    std::memcpy(&id, v.data(), sizeof(id));
  }
  ncclComm_t c = nullptr;
  check("ncclCommInitRank", ncclCommInitRank(&c, size, id, rank), nullptr);
  comm_ = c;
  start();
}

ProcessGroupMlap2p::ProcessGroupMlap2p(ProcessGroupMlap2p& parent, int color,
                                       int key, int rank, int size,
                                       milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      timeout_(timeout),
      inline_bytes_(parent.inline_bytes_),
      spin_us_(parent.spin_us_) {
  TORCH_CHECK(color >= 0, "mlap2p: split color must be >= 0");
  ncclComm_t c = parent.runSplit(color, key);
  TORCH_CHECK(c, "mlap2p: rank ", parent.getRank(),
              ": ncclCommSplit gave no communicator for color ", color);
  int n = 0, r = -1;
  check("ncclCommCount", ncclCommCount(c, &n), c);
  check("ncclCommUserRank", ncclCommUserRank(c, &r), c);
  if (n != size || r != rank) {
    (void)ncclCommAbort(c);
    TORCH_CHECK(false, "mlap2p: split gave rank ", r, " of ", n,
                ", torch expects rank ", rank, " of ", size);
  }
  comm_ = c;
  start();
}

void ProcessGroupMlap2p::start() {
  // The p2p engine's communicator: every rank of the group is here now.
  ncclComm_t p = nullptr;
  ncclResult_t r = ncclCommSplit(comm_, 0, rank_, &p, nullptr);
  const int e = r == ncclSuccess ? mlap2p_stream_create(&pstream_) : 0;
  if (r != ncclSuccess || e) {
    const std::string why =
        "mlap2p: rank " + std::to_string(rank_) + ": " +
        (r != ncclSuccess
             ? std::string("ncclCommSplit for the p2p engine failed: ") +
                   ncclGetErrorString(r) + ": " + orEmpty(ncclGetLastError(comm_))
             : std::string("no stream for the p2p engine: ") +
                   mlap2p_strerror(e));
    if (p) (void)ncclCommAbort(p);
    (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    throw std::runtime_error(why);
  }
  p2p_ = p;
  connected_.assign(static_cast<size_t>(size_), 0);
  stream_ = std::thread([this] { streamLoop(); });
  watchdog_ = std::thread([this] { watchdogLoop(); });
  engine_ = std::thread([this] { p2pLoop(); });
}

ProcessGroupMlap2p::~ProcessGroupMlap2p() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (stream_.joinable()) stream_.join();  // drains the queue
  if (watchdog_.joinable()) watchdog_.join();
  {
    std::lock_guard<std::mutex> lock(pmu_);
    pstop_ = true;
  }
  pcv_.notify_all();
  if (engine_.joinable()) engine_.join();  // drains, within the timeout
  ncclComm_t c, p;
  {
    std::lock_guard<std::mutex> lock(pmu_);
    p = p2p_;
    p2p_ = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = comm_;
    comm_ = nullptr;
  }
  // Every rank destroys the two in the same order (a destroy waits for
  // the peers).
  if (p) (void)ncclCommDestroy(p);
  if (pstream_) (void)mlap2p_stream_destroy(pstream_);
  if (c) (void)ncclCommDestroy(c);
}

milliseconds ProcessGroupMlap2p::opTimeout(milliseconds t) const {
  return t == c10d::kUnsetTimeout ? timeout_ : t;
}

void ProcessGroupMlap2p::fail(const char* op, ncclResult_t r,
                              ncclComm_t comm) const {
  std::ostringstream m;
  m << "mlap2p: rank " << rank_ << ": " << op << " failed: "
    << ncclGetErrorString(r);
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    why = broken_why_;
  }
  // After an abort the communicator is gone: only the thread's message.
  const char* last = ncclGetLastError(why.empty() ? comm : nullptr);
  if (last && *last) m << ": " << last;
  if (!why.empty()) m << " [" << why << "]";
  throw LibraryError(m.str());
}

c10::intrusive_ptr<WorkMlap2p> ProcessGroupMlap2p::post(
    c10d::OpType type, const char* name, milliseconds timeout, size_t bytes,
    std::vector<at::Tensor> outputs, WorkMlap2p::Fn fn,
    std::vector<c10::intrusive_ptr<WorkMlap2p>> members) {
  auto w = c10::make_intrusive<WorkMlap2p>(this, rank_, type, name, seq_++,
                                           opTimeout(timeout), bytes,
                                           std::move(outputs), std::move(fn));
  w->members_ = std::move(members);
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) {
    auto err = broken_;
    lock.unlock();
    w->complete(err);
    return w;
  }
  if (!running_ && queue_.empty() && bytes <= static_cast<size_t>(inline_bytes_)) {
    // The stream is idle: run it here, in stream order, without a hand-off.
    running_ = true;
    current_ = w.get();
    current_start_ = std::chrono::steady_clock::now();
    ncclComm_t c = comm_;
    lock.unlock();
    std::exception_ptr err = w->execute(c);
    lock.lock();
    running_ = false;
    current_ = nullptr;
    const bool wake = !queue_.empty();
    lock.unlock();
    if (wake) cv_.notify_all();
    w->complete(err);
    return w;
  }
  queue_.push_back(w);
  queued_.fetch_add(1, std::memory_order_release);
  const bool wake = sleeping_;
  lock.unlock();
  if (wake) cv_.notify_all();
  return w;
}

std::exception_ptr WorkMlap2p::execute(ncclComm_t comm) {
  try {
    if (!comm) {
      std::lock_guard<std::mutex> lock(pg_->mu_);
      if (pg_->broken_) return pg_->broken_;
      throw std::runtime_error("mlap2p: no communicator");
    }
    fn_(comm);
    return nullptr;
  } catch (const LibraryError& e) {
    // The communicator's state is unknown now: abort it, so that every
    // later operation fails at once with this first reason.
    pg_->abortComm(e.what());
    return std::current_exception();
  } catch (...) {
    return std::current_exception();
  }
}

void ProcessGroupMlap2p::streamLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() && !stop_ && spin_us_ > 0) {
      // Stay awake a little (yielding the CPU) for the next operation:
      // a condition-variable wake costs about 10 us here.
      lock.unlock();
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::microseconds(spin_us_);
      while (queued_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      lock.lock();
    }
    sleeping_ = true;
    cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !running_); });
    sleeping_ = false;
    if (queue_.empty() || running_) {
      if (stop_ && queue_.empty() && !running_) break;
      continue;
    }
    auto w = queue_.front();
    queue_.pop_front();
    queued_.fetch_sub(1, std::memory_order_relaxed);
    running_ = true;
    current_ = w.get();
    current_start_ = std::chrono::steady_clock::now();
    ncclComm_t c = comm_;
    lock.unlock();
    std::exception_ptr err = w->execute(c);
    lock.lock();
    running_ = false;
    current_ = nullptr;
    lock.unlock();
    w->complete(err);
    lock.lock();
  }
}

void ProcessGroupMlap2p::watchdogLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (!running_ || !current_ || !comm_) continue;
    const auto t = current_->timeout();
    if (std::chrono::steady_clock::now() - current_start_ <= t) continue;
    const std::string why = "mlap2p: rank " + std::to_string(rank_) + ": " +
                            current_->name() + " #" +
                            std::to_string(current_->seq()) +
                            " ran longer than its timeout of " + msString(t) +
                            "; communicator aborted";
    lock.unlock();
    abortComm(why);
    lock.lock();
  }
}

void ProcessGroupMlap2p::abortComm(const std::string& why) {
  std::deque<c10::intrusive_ptr<WorkMlap2p>> dropped;
  ncclComm_t c;
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!comm_) return;
    c = comm_;
    comm_ = nullptr;
    broken_why_ = why;
    broken_ = std::make_exception_ptr(std::runtime_error(why));
    err = broken_;
    dropped.swap(queue_);
    queued_.store(0, std::memory_order_relaxed);
  }
  cv_.notify_all();
  (void)ncclCommAbort(c);
  {
    // Under pmu_: the engine is not inside p2p_ then (a connect on
    // pstream_ is, and the abort ends it).  The engine fails what it
    // holds once it sees p2p_ gone.
    std::lock_guard<std::mutex> lock(pmu_);
    if (p2p_) (void)ncclCommAbort(p2p_);
    p2p_ = nullptr;
  }
  pcv_.notify_all();
  for (auto& w : dropped) w->complete(err);
}

ncclComm_t ProcessGroupMlap2p::runSplit(int color, int key) {
  auto child = std::make_shared<ncclComm_t>(nullptr);
  auto w = post(c10d::OpType::UNKNOWN, "split", c10d::kUnsetTimeout, 0, {},
                [this, child, color, key](ncclComm_t comm) {
                  check("ncclCommSplit",
                        ncclCommSplit(comm, color, key, child.get(), nullptr),
                        comm);
                });
  w->wait();
  return *child;
}

void ProcessGroupMlap2p::splitNoColor() {
  ncclComm_t c = runSplit(NCCL_SPLIT_NOCOLOR, rank_);
  TORCH_CHECK(c == nullptr, "mlap2p: NCCL_SPLIT_NOCOLOR gave a communicator");
}

std::string ProcessGroupMlap2p::describe() const {
  int v = 0;
  (void)ncclGetVersion(&v);
  std::ostringstream m;
  m << "mlap2p rank " << rank_ << "/" << size_ << " (NCCL API " << v
    << ", inline up to " << inline_bytes_ << " bytes, timeout "
    << msString(timeout_) << ")";
  return m.str();
}

// ------------------------------------------------------------ operations

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  checkOne(tensors, "allreduce");
  at::Tensor t = tensors[0];
  at::Tensor buf = dense(t);
  Reduction r = reduction(opts.reduceOp, t.scalar_type(), "allreduce");
  return post(c10d::OpType::ALLREDUCE, "allreduce", opts.timeout, nbytes(t),
              {t}, [this, t, buf, r](ncclComm_t comm) mutable {
                ScopedOp op(r, comm);
                check("ncclRedOpCreatePreMulSum", op.result(), comm);
                check("allreduce",
                      ncclAllReduce(buf.data_ptr(), buf.data_ptr(),
                                    buf.numel(), r.dt, op.op(), comm, kStream),
                      comm);
                copyBack(t, buf);
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "mlap2p: allreduce_coalesced: no tensors");
  for (const auto& t : tensors) checkSame(t, tensors[0], "allreduce_coalesced");
  std::vector<at::Tensor> ts = tensors;
  Reduction r =
      reduction(opts.reduceOp, ts[0].scalar_type(), "allreduce_coalesced");
  at::Tensor flat = flatCat(ts);
  return post(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced",
              opts.timeout, nbytes(flat), ts,
              [this, ts, flat, r](ncclComm_t comm) mutable {
                ScopedOp op(r, comm);
                check("ncclRedOpCreatePreMulSum", op.result(), comm);
                check("allreduce_coalesced",
                      ncclAllReduce(flat.data_ptr(), flat.data_ptr(),
                                    flat.numel(), r.dt, op.op(), comm,
                                    kStream),
                      comm);
                unpack(flat, 0, ts);
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  checkOne(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "mlap2p: broadcast: rootTensor must be 0");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_,
              "mlap2p: broadcast: root ", opts.rootRank, " out of range");
  at::Tensor t = tensors[0];
  at::Tensor buf = dense(t);
  const int root = static_cast<int>(opts.rootRank);
  const ncclDataType_t dt = ncclType(t.scalar_type());
  return post(c10d::OpType::BROADCAST, "broadcast", opts.timeout, nbytes(t),
              {t}, [this, t, buf, root, dt](ncclComm_t comm) mutable {
                check("broadcast",
                      ncclBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                    dt, root, comm, kStream),
                      comm);
                copyBack(t, buf);
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::reduce(
    std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  checkOne(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "mlap2p: reduce: rootTensor must be 0");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_,
              "mlap2p: reduce: root ", opts.rootRank, " out of range");
  at::Tensor t = tensors[0];
  at::Tensor buf = dense(t);
  const int root = static_cast<int>(opts.rootRank);
  Reduction r = reduction(opts.reduceOp, t.scalar_type(), "reduce");
  return post(c10d::OpType::REDUCE, "reduce", opts.timeout, nbytes(t), {t},
              [this, t, buf, r, root](ncclComm_t comm) mutable {
                ScopedOp op(r, comm);
                check("ncclRedOpCreatePreMulSum", op.result(), comm);
                check("reduce",
                      ncclReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                 r.dt, op.op(), root, comm, kStream),
                      comm);
                if (rank_ == root) copyBack(t, buf);
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  checkOne(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 &&
                  outputs[0].size() == static_cast<size_t>(size_),
              "mlap2p: allgather: one list of ", size_, " output tensors");
  at::Tensor in = dense(inputs[0]);
  for (const auto& o : outputs[0]) {
    checkSame(o, in, "allgather");
    TORCH_CHECK(o.numel() == in.numel(), "mlap2p: allgather: output has ",
                o.numel(), " elements, input ", in.numel());
  }
  std::vector<at::Tensor> outs = outputs[0];
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  const ncclDataType_t dt = ncclType(in.scalar_type());
  return post(c10d::OpType::ALLGATHER, "allgather", opts.timeout, nbytes(flat),
              outs, [this, in, outs, flat, dt](ncclComm_t comm) mutable {
                check("allgather",
                      ncclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(),
                                    dt, comm, kStream),
                      comm);
                unpack(flat, 0, outs);
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::_allgather_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::AllgatherOptions& opts) {
  checkTensor(input, "_allgather_base");
  checkSame(output, input, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "mlap2p: _allgather_base: output has ", output.numel(),
              " elements, not ", size_, " x ", input.numel());
  at::Tensor in = dense(input);
  at::Tensor out = output;
  at::Tensor obuf = dense(output);
  const ncclDataType_t dt = ncclType(in.scalar_type());
  return post(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", opts.timeout,
              nbytes(out), {out},
              [this, in, out, obuf, dt](ncclComm_t comm) mutable {
                check("_allgather_base",
                      ncclAllGather(in.data_ptr(), obuf.data_ptr(), in.numel(),
                                    dt, comm, kStream),
                      comm);
                copyBack(out, obuf);
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "mlap2p: allgather_coalesced: no tensors");
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_),
              "mlap2p: allgather_coalesced: ", size_, " output lists, got ",
              outputLists.size());
  for (const auto& t : inputs) checkSame(t, inputs[0], "allgather_coalesced");
  for (const auto& l : outputLists) {
    TORCH_CHECK(l.size() == inputs.size(), "mlap2p: allgather_coalesced: ",
                "each output list needs ", inputs.size(), " tensors");
    for (size_t i = 0; i < l.size(); i++) {
      checkSame(l[i], inputs[0], "allgather_coalesced");
      TORCH_CHECK(l[i].numel() == inputs[i].numel(),
                  "mlap2p: allgather_coalesced: output ", i, " has ",
                  l[i].numel(), " elements, input ", inputs[i].numel());
    }
  }
  at::Tensor in = flatCat(inputs);
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  auto lists = outputLists;
  std::vector<at::Tensor> outs;
  for (const auto& l : lists) outs.insert(outs.end(), l.begin(), l.end());
  const ncclDataType_t dt = ncclType(in.scalar_type());
  return post(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced",
              opts.timeout, nbytes(flat), outs,
              [this, in, flat, outs, dt](ncclComm_t comm) mutable {
                check("allgather_coalesced",
                      ncclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(),
                                    dt, comm, kStream),
                      comm);
                unpack(flat, 0, outs);  // rank-major, as the lists are
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  checkOne(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 &&
                  inputs[0].size() == static_cast<size_t>(size_),
              "mlap2p: reduce_scatter: one list of ", size_, " input tensors");
  at::Tensor out = outputs[0];
  for (const auto& i : inputs[0]) {
    checkSame(i, out, "reduce_scatter");
    TORCH_CHECK(i.numel() == out.numel(), "mlap2p: reduce_scatter: input has ",
                i.numel(), " elements, output ", out.numel());
  }
  at::Tensor flat = flatCat(inputs[0]);
  at::Tensor obuf = dense(out);
  Reduction r = reduction(opts.reduceOp, out.scalar_type(), "reduce_scatter");
  return post(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", opts.timeout,
              nbytes(flat), {out},
              [this, out, obuf, flat, r](ncclComm_t comm) mutable {
                ScopedOp op(r, comm);
                check("ncclRedOpCreatePreMulSum", op.result(), comm);
                check("reduce_scatter",
                      ncclReduceScatter(flat.data_ptr(), obuf.data_ptr(),
                                        obuf.numel(), r.dt, op.op(), comm,
                                        kStream),
                      comm);
                copyBack(out, obuf);
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  checkTensor(output, "_reduce_scatter_base");
  checkSame(input, output, "_reduce_scatter_base");
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "mlap2p: _reduce_scatter_base: input has ", input.numel(),
              " elements, not ", size_, " x ", output.numel());
  at::Tensor in = dense(input);
  at::Tensor out = output;
  at::Tensor obuf = dense(output);
  Reduction r =
      reduction(opts.reduceOp, out.scalar_type(), "_reduce_scatter_base");
  return post(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base",
              opts.timeout, nbytes(in), {out},
              [this, in, out, obuf, r](ncclComm_t comm) mutable {
                ScopedOp op(r, comm);
                check("ncclRedOpCreatePreMulSum", op.result(), comm);
                check("_reduce_scatter_base",
                      ncclReduceScatter(in.data_ptr(), obuf.data_ptr(),
                                        obuf.numel(), r.dt, op.op(), comm,
                                        kStream),
                      comm);
                copyBack(out, obuf);
              });
}

namespace {

// Element offsets and counts per rank of an all-to-all along dim 0.
void splits(const at::Tensor& t, const std::vector<int64_t>& sizes, int n,
            const char* what, std::vector<int64_t>& count,
            std::vector<int64_t>& off) {
  count.assign(n, 0);
  off.assign(n, 0);
  if (t.dim() == 0) {
    TORCH_CHECK(sizes.empty() && n == 1, "mlap2p: alltoall_base: ", what,
                " is a scalar");
    count[0] = 1;
    return;
  }
  const int64_t rows = t.size(0);
  const int64_t row = rows ? t.numel() / rows : 0;
  if (sizes.empty()) {
    TORCH_CHECK(rows % n == 0, "mlap2p: alltoall_base: ", what, " dim 0 (",
                rows, ") does not divide by ", n);
    for (int i = 0; i < n; i++) {
      count[i] = rows / n * row;
      off[i] = i * count[i];
    }
    return;
  }
  TORCH_CHECK(sizes.size() == static_cast<size_t>(n),
              "mlap2p: alltoall_base: ", what, " split sizes need ", n,
              " entries, got ", sizes.size());
  int64_t sum = 0;
  for (int i = 0; i < n; i++) {
    TORCH_CHECK(sizes[i] >= 0, "mlap2p: alltoall_base: negative split size");
    off[i] = sum * row;
    count[i] = sizes[i] * row;
    sum += sizes[i];
  }
  TORCH_CHECK(sum == rows, "mlap2p: alltoall_base: ", what,
              " split sizes add up to ", sum, ", dim 0 is ", rows);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::alltoall_base(
    at::Tensor& output, at::Tensor& input,
    std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions& opts) {
  checkTensor(input, "alltoall_base");
  checkSame(output, input, "alltoall_base");
  std::vector<int64_t> scount, soff, rcount, roff;
  splits(input, inputSplitSizes, size_, "input", scount, soff);
  splits(output, outputSplitSizes, size_, "output", rcount, roff);
  const bool equal = inputSplitSizes.empty() && outputSplitSizes.empty();
  TORCH_CHECK(!equal || input.numel() == output.numel(),
              "mlap2p: alltoall_base: input has ", input.numel(),
              " elements, output ", output.numel());
  // Checked here, before any rank is waited for: a failure inside the
  // operation would abort the communicator.
  TORCH_CHECK(!input.is_alias_of(output),
              "mlap2p: alltoall_base: input and output share storage "
              "(all-to-all has no in-place form)");
  TORCH_CHECK(equal || rcount[rank_] == scount[rank_],
              "mlap2p: alltoall_base: rank ", rank_, " sends itself ",
              scount[rank_], " elements but expects ", rcount[rank_]);
  at::Tensor in = dense(input);
  at::Tensor out = output;
  at::Tensor obuf = dense(output);
  const ncclDataType_t dt = ncclType(in.scalar_type());
  const size_t es = in.element_size();
  return post(
      c10d::OpType::ALLTOALL_BASE, "alltoall_base", opts.timeout, nbytes(in),
      {out},
      [this, in, out, obuf, dt, es, equal, scount, soff, rcount,
       roff](ncclComm_t comm) mutable {
        char* s = static_cast<char*>(in.data_ptr());
        char* d = static_cast<char*>(obuf.data_ptr());
        if (equal) {
          check("alltoall_base",
                ncclAlltoAll(s, d, static_cast<size_t>(scount[0]), dt, comm,
                             kStream),
                comm);
        } else {
          std::memcpy(d + roff[rank_] * es, s + soff[rank_] * es,
                      scount[rank_] * es);
          check("alltoall_base", ncclGroupStart(), comm);
          ncclResult_t res = ncclSuccess;
          for (int p = 0; p < size_ && res == ncclSuccess; p++) {
            if (p == rank_) continue;
            if (scount[p])
              res = ncclSend(s + soff[p] * es, scount[p], dt, p, comm, kStream);
            if (res == ncclSuccess && rcount[p])
              res = ncclRecv(d + roff[p] * es, rcount[p], dt, p, comm, kStream);
          }
          ncclResult_t end = ncclGroupEnd();
          check("alltoall_base", res != ncclSuccess ? res : end, comm);
        }
        copyBack(out, obuf);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) &&
                  outputs.size() == static_cast<size_t>(size_),
              "mlap2p: alltoall: ", size_, " input and output tensors");
  for (const auto& t : inputs) checkSame(t, inputs[0], "alltoall");
  for (const auto& t : outputs) checkSame(t, inputs[0], "alltoall");
  TORCH_CHECK(outputs[rank_].numel() == inputs[rank_].numel(),
              "mlap2p: alltoall: rank ", rank_, " sends itself ",
              inputs[rank_].numel(), " elements but expects ",
              outputs[rank_].numel());
  std::vector<at::Tensor> ins, obufs, outs = outputs;
  size_t bytes = 0;
  for (const auto& t : inputs) {
    ins.push_back(dense(t));
    bytes += nbytes(t);
  }
  for (const auto& t : outputs) obufs.push_back(dense(t));
  const ncclDataType_t dt = ncclType(inputs[0].scalar_type());
  return post(c10d::OpType::ALLTOALL, "alltoall", opts.timeout, bytes, outs,
              [this, ins, obufs, outs, dt](ncclComm_t comm) mutable {
                obufs[rank_].view(-1).copy_(ins[rank_].view(-1));
                check("alltoall", ncclGroupStart(), comm);
                ncclResult_t res = ncclSuccess;
                for (int p = 0; p < size_ && res == ncclSuccess; p++) {
                  if (p == rank_) continue;
                  if (ins[p].numel())
                    res = ncclSend(ins[p].data_ptr(), ins[p].numel(), dt, p,
                                   comm, kStream);
                  if (res == ncclSuccess && obufs[p].numel())
                    res = ncclRecv(obufs[p].data_ptr(), obufs[p].numel(), dt,
                                   p, comm, kStream);
                }
                ncclResult_t end = ncclGroupEnd();
                check("alltoall", res != ncclSuccess ? res : end, comm);
                for (int p = 0; p < size_; p++) copyBack(outs[p], obufs[p]);
              });
}

void ProcessGroupMlap2p::startCoalescing() {
  TORCH_CHECK(!coalescing_, "mlap2p: startCoalescing: already coalescing");
  coalescing_ = true;
}

void ProcessGroupMlap2p::endCoalescing(
    std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs: the batch's Works*/) {
  TORCH_CHECK(coalescing_, "mlap2p: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<P2pOp> ops = std::move(batch_);
  batch_.clear();
  if (!ops.empty()) p2pPost(std::move(ops));
}

ProcessGroupMlap2p::P2pOp ProcessGroupMlap2p::p2pOp(bool send,
                                                    const at::Tensor& t,
                                                    int peer) {
  at::Tensor buf = dense(t);
  auto w = c10::make_intrusive<WorkMlap2p>(
      this, rank_, send ? c10d::OpType::SEND : c10d::OpType::RECV,
      send ? "send" : "recv", seq_++, timeout_, nbytes(buf),
      std::vector<at::Tensor>{t}, nullptr);
  if (!send) w->source_rank_ = peer;
  w->p2p_ = true;
  return P2pOp{w, send, t, buf, peer, {}, 0};
}

// Inside a batch: recorded, posted with the batch (endCoalescing).
c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::p2p(bool send,
                                                       const at::Tensor& t,
                                                       int peer) {
  batch_.push_back(p2pOp(send, t, peer));
  return batch_.back().w;
}

// Posts @o as ncclSend/ncclRecv would send it (the pair's P2P channels,
// in parts), into o.reqs; 0 or -errno.  A part that did post stays in
// o.reqs to be tested out even when a later one fails.
int ProcessGroupMlap2p::p2pIssue(P2pOp& o) {
  int n = 0;
  o.reqs.assign(MLAP2P_NCCL_IPOST_MAX, nullptr);
  const int r = mlap2p_nccl_ipost(p2p_, o.send ? 1 : 0, o.buf.data_ptr(),
                                  nbytes(o.buf), ncclUint8, o.peer,
                                  o.reqs.data(), &n);
  o.reqs.resize(static_cast<size_t>(n));
  if (r && !o.status) o.status = r;
  return r;
}

// Tests @o's requests once (each test progresses the whole communicator):
// true when none is left; o.status keeps the first error.
bool ProcessGroupMlap2p::p2pTest(P2pOp& o) {
  bool left = false;
  for (auto& q : o.reqs) {
    if (!q) continue;
    int fin = 0;
    const int r = mlap2p_request_test(&q, &fin);
    if (r && !o.status) o.status = r;
    if (r && !fin) q = nullptr;  // ended by the library (an abort)
    if (q) left = true;
  }
  return !left;
}

std::string ProcessGroupMlap2p::p2pWhy(const P2pOp& o, int err) const {
  // Nothing posted: the post failed, and said why on the communicator.
  const char* last = o.reqs.empty() && p2p_ ? ncclGetLastError(p2p_)
                                            : mlap2p_last_error();
  return "mlap2p: rank " + std::to_string(rank_) + ": " + o.w->name() +
         (o.send ? " to" : " from") + " rank " + std::to_string(o.peer) +
         " failed: " + mlap2p_strerror(err) + (last && *last ? ": " : "") +
         orEmpty(last);
}

// The caller posts to the library itself when the engine has nothing
// ahead of it and the pair is connected (no hand-off: a small send is
// done here); the engine progresses what is not done at once.
void ProcessGroupMlap2p::p2pPost(std::vector<P2pOp> ops) {
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    err = broken_;
  }
  std::vector<P2pOp> done;
  std::string why;
  bool left = false;  // work for the engine
  if (!err) {
    std::lock_guard<std::mutex> lock(pmu_);
    for (auto& o : ops) {
      if (!why.empty() || !p2p_ || !pqueue_.empty() || !pwaiting_.empty() ||
          pconnecting_ || !connected_[o.peer]) {
        pqueue_.push_back(std::move(o));
        left = true;
        continue;
      }
      (void)p2pIssue(o);
      const bool fin = p2pTest(o);
      if (o.status && why.empty()) why = p2pWhy(o, o.status);
      if (fin) {
        done.push_back(std::move(o));
      } else {
        pactive_.push_back(std::move(o));
        left = true;
      }
    }
  }
  if (err) {
    for (auto& o : ops) o.w->complete(err);
    return;
  }
  if (left) pcv_.notify_all();
  if (!why.empty()) abortComm(why);
  if (!done.empty()) p2pFinish(done);
}

// One pass of the engine, under pmu_: take what callers posted, finish a
// connect, post what may be posted (in order), test what is in flight.
// Finished ops go to @done (completed by the caller, without pmu_); @why
// is set when the communicators must be aborted.  True if anything moved.
bool ProcessGroupMlap2p::p2pStep(std::vector<P2pOp>& done, std::string& why) {
  std::vector<P2pOp>& waiting = pwaiting_;
  std::vector<P2pOp>& active = pactive_;
  std::vector<int>& pending = ppending_;
  bool& connecting = pconnecting_;
  bool moved = false;
  while (!pqueue_.empty()) {
    waiting.push_back(std::move(pqueue_.front()));
    pqueue_.pop_front();
    moved = true;
  }
  // Requests first: after an abort the library has ended them all, and
  // test only frees them then.  (None are in flight during a connect.)
  for (size_t i = 0; i < active.size();) {
    if (!p2pTest(active[i])) {
      i++;
      continue;
    }
    const int r = active[i].status;
    if (r && why.empty() && p2p_) why = p2pWhy(active[i], r);
    done.push_back(std::move(active[i]));
    active.erase(active.begin() + static_cast<long>(i));
    moved = true;
  }
  if (!p2p_) {  // aborted: the connect ended too
    for (auto& o : waiting) {
      o.status = -ECANCELED;
      done.push_back(std::move(o));
    }
    waiting.clear();
    connecting = false;
    pending.clear();
    return moved;
  }
  if (connecting) {
    const int r = mlap2p_stream_query(pstream_);
    if (r == -EBUSY) return moved;
    connecting = false;
    moved = true;
    if (r) {
      const char* last = ncclGetLastError(p2p_);
      if (why.empty())
        why = "mlap2p: rank " + std::to_string(rank_) +
              ": connecting to the p2p peers failed: " +
              mlap2p_strerror(r) + (last && *last ? ": " : "") +
              (last ? last : "");
      return moved;
    }
    for (int p : pending) connected_[p] = 1;
    pending.clear();
  }
  size_t i = 0;
  for (; i < waiting.size(); i++) {
    P2pOp& o = waiting[i];
    if (!connected_[o.peer]) break;
    const int r = p2pIssue(o);
    if (r) {
      if (why.empty()) why = p2pWhy(o, r);
      if (o.reqs.empty()) break;
    }
    active.push_back(std::move(o));  // (parts that posted: to test out)
    moved = true;
    if (r) {
      i++;
      break;
    }
  }
  waiting.erase(waiting.begin(), waiting.begin() + static_cast<long>(i));
  if (waiting.empty() || !why.empty()) return moved;
  // The connect runs on pstream_, inside the library, and the library
  // takes one thread at a time on a communicator (its requests progress
  // in whichever thread tests or waits): so it starts once every request
  // in flight has ended, and nothing is posted or tested until it ends.
  if (!active.empty()) return moved;
  // The next op's peer (and every later unconnected one) is not connected:
  // one zero-byte exchange with each, which connects the pair; the peer's
  // engine does the same for its first op with this rank.
  std::vector<char> want(static_cast<size_t>(size_), 0);
  for (const auto& o : waiting)
    if (!connected_[o.peer] && !want[o.peer]) {
      want[o.peer] = 1;
      pending.push_back(o.peer);
    }
  static char none;
  ncclResult_t res = ncclGroupStart();
  for (int p : pending) {
    if (res == ncclSuccess)
      res = ncclSend(&none, 0, ncclInt8, p, p2p_, pstream_);
    if (res == ncclSuccess)
      res = ncclRecv(&none, 0, ncclInt8, p, p2p_, pstream_);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) {
    const char* last = ncclGetLastError(p2p_);
    if (why.empty())
      why = "mlap2p: rank " + std::to_string(rank_) +
            ": connecting to the p2p peers failed: " +
            ncclGetErrorString(res) + (last && *last ? ": " : "") +
            (last ? last : "");
    pending.clear();
    return moved;
  }
  connecting = true;
  return true;
}

// Completes finished ops (without pmu_: a Work's callbacks may post).
void ProcessGroupMlap2p::p2pFinish(std::vector<P2pOp>& done) {
  std::exception_ptr broken;
  {
    std::lock_guard<std::mutex> l(mu_);
    broken = broken_;
  }
  for (auto& o : done) {
    std::exception_ptr err;
    if (!o.status && !o.send) {
      try {  // into a strided tensor: an error is this op's, not the loop's
        copyBack(o.t, o.buf);
      } catch (...) {
        err = std::current_exception();
      }
    }
    if (o.status)
      err = broken ? broken
                   : std::make_exception_ptr(std::runtime_error(
                         "mlap2p: rank " + std::to_string(rank_) + ": " +
                         o.w->name() + " failed: " +
                         mlap2p_strerror(o.status)));
    o.w->complete(err);
  }
  done.clear();
}

// Whether the engine has anything to do (pmu_ held).
bool ProcessGroupMlap2p::p2pBusy() const {
  return !pqueue_.empty() || !pwaiting_.empty() || !pactive_.empty() ||
         pconnecting_;
}

// One pass of the engine, @lock holding pmu_: a step, then, without pmu_,
// the abort it asked for and the completions.  True when ops ended or the
// group was aborted; @moved says whether the step made progress.
bool ProcessGroupMlap2p::p2pPass(std::unique_lock<std::mutex>& lock,
                                 std::vector<P2pOp>& done, bool& moved) {
  std::string why;
  moved = p2pStep(done, why);
  if (done.empty() && why.empty()) return false;
  lock.unlock();
  if (!why.empty()) abortComm(why);
  p2pFinish(done);
  lock.lock();
  return true;
}

void ProcessGroupMlap2p::p2pLoop() {
  const std::vector<P2pOp>& waiting = pwaiting_;
  const std::vector<P2pOp>& active = pactive_;
  const bool& connecting = pconnecting_;
  std::vector<P2pOp> done;
  // With requests in flight the engine yields (a message's steps need
  // it) until kBusy has passed without one finishing, then sleeps, 10 to
  // 200 us; idle, it yields for spin_us_, then sleeps until a post.
  constexpr auto kBusy = std::chrono::milliseconds(10);
  auto idleSince = std::chrono::steady_clock::now();
  auto nap = std::chrono::microseconds(10);
  std::chrono::steady_clock::time_point stopAt;
  std::unique_lock<std::mutex> lock(pmu_);
  for (;;) {
    if (pdrivers_) {  // a waiter progresses everything (p2pDrive)
      // Woken when the last driver leaves work, or by a post or a stop.
      pcv_.wait(lock, [&] { return pdrivers_ == 0; });
      idleSince = std::chrono::steady_clock::now();
      nap = std::chrono::microseconds(10);
    }
    bool moved;
    if (p2pPass(lock, done, moved)) continue;
    if (pstop_ && !p2pBusy()) break;
    if (pstop_ && p2p_) {
      // Destroyed with sends or receives that nobody waited for: they
      // get the group's timeout to finish, then the group is aborted.
      if (stopAt == std::chrono::steady_clock::time_point())
        stopAt = std::chrono::steady_clock::now() + timeout_;
      else if (std::chrono::steady_clock::now() > stopAt) {
        lock.unlock();
        abortComm("mlap2p: rank " + std::to_string(rank_) +
                  ": process group destroyed with " +
                  std::to_string(waiting.size() + active.size()) +
                  " send/recv not finished within " + msString(timeout_));
        lock.lock();
        continue;
      }
    }
    if (moved) {
      idleSince = std::chrono::steady_clock::now();
      nap = std::chrono::microseconds(10);
      continue;
    }
    const bool busy = !active.empty() || connecting;
    const size_t nActive = active.size();
    if (std::chrono::steady_clock::now() - idleSince <
        (busy ? std::chrono::duration_cast<std::chrono::microseconds>(kBusy)
              : std::chrono::microseconds(spin_us_))) {
      // The next op (a reply, say) comes soon more often than not: a
      // wake through pcv_ costs about 10 us here.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    if (waiting.empty() && active.empty() && !connecting) {
      // Until there is work: a caller may have posted straight to active
      // (p2pPost), or a driver may have left ops waiting or a connect.
      pcv_.wait(lock, [&] { return pstop_ || p2pBusy(); });
      idleSince = std::chrono::steady_clock::now();
      continue;
    }
    pcv_.wait_for(lock, nap,
                  [&] { return !pqueue_.empty() || active.size() > nActive; });
    nap = std::min(nap * 2, std::chrono::microseconds(200));
  }
}

// wait() on a send or recv: the waiting thread progresses the engine
// itself (everything in it, in order) until @w ends or @deadline, while
// the engine thread sleeps, as MPI's blocking calls poll: no hand-off
// between two threads on the rank's core for each message.  After
// spin_us_ without anything finishing it yields between passes.
void ProcessGroupMlap2p::p2pDrive(WorkMlap2p& w,
                                  std::chrono::steady_clock::time_point
                                      deadline) {
  std::vector<P2pOp> done;
  auto idleSince = std::chrono::steady_clock::now();
  const auto spin = std::chrono::microseconds(spin_us_);
  std::unique_lock<std::mutex> lock(pmu_);
  // Leaves as a driver however it leaves (a tensor copy may throw): the
  // engine sleeps while pdrivers_ is not 0.
  struct Leave {
    ProcessGroupMlap2p* pg;
    std::unique_lock<std::mutex>& lock;
    ~Leave() {
      if (!lock.owns_lock()) lock.lock();
      // The engine takes over what is left (a wake costs the rank's CPU
      // a context switch: none when nothing is left).
      const bool left = --pg->pdrivers_ == 0 && pg->p2pBusy();
      lock.unlock();
      if (left) pg->pcv_.notify_all();
    }
  } leave{this, lock};
  pdrivers_++;
  while (!w.done_.load(std::memory_order_acquire)) {
    bool moved;
    if (p2pPass(lock, done, moved)) {
      idleSince = std::chrono::steady_clock::now();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || (!p2p_ && pqueue_.empty() && pwaiting_.empty() &&
                            pactive_.empty()))
      break;
    if (moved) idleSince = now;
    // Let callers of p2pPost in between passes.
    lock.unlock();
    if (now - idleSince > spin) std::this_thread::yield();
    lock.lock();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::send(
    std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  checkOne(tensors, "send");
  TORCH_CHECK(dstRank >= 0 && dstRank < size_ && dstRank != rank_,
              "mlap2p: send: bad destination rank ", dstRank);
  if (coalescing_) return p2p(true, tensors[0], dstRank);
  P2pOp o = p2pOp(true, tensors[0], dstRank);
  auto w = o.w;
  std::vector<P2pOp> ops;
  ops.push_back(std::move(o));
  p2pPost(std::move(ops));
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::recv(
    std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  checkOne(tensors, "recv");
  TORCH_CHECK(srcRank >= 0 && srcRank < size_ && srcRank != rank_,
              "mlap2p: recv: bad source rank ", srcRank);
  if (coalescing_) return p2p(false, tensors[0], srcRank);
  P2pOp o = p2pOp(false, tensors[0], srcRank);
  auto w = o.w;
  std::vector<P2pOp> ops;
  ops.push_back(std::move(o));
  p2pPost(std::move(ops));
  return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMlap2p::barrier(
    const c10d::BarrierOptions& opts) {
  // Every earlier operation of this group has run when this one does
  // (one stream), and no rank leaves before all have arrived.
  at::Tensor one = at::ones({1}, at::TensorOptions().dtype(at::kInt));
  return post(c10d::OpType::BARRIER, "barrier", opts.timeout, 0, {},
              [this, one](ncclComm_t comm) {
                check("barrier",
                      ncclAllReduce(one.data_ptr(), one.data_ptr(), 1,
                                    ncclInt32, ncclSum, comm, kStream),
                      comm);
              });
}

}  // namespace mlap2p_torch
