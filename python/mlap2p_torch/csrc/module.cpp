// SPDX-License-Identifier: MIT
//
// mlap2p_torch._C: the Python face of ProcessGroupMlap2p.
#include <torch/extension.h>

#include <pybind11/chrono.h>  // timedelta <-> std::chrono (the creator's timeout)

#include "ProcessGroupMlap2p.hpp"

namespace py = pybind11;
using mlap2p_torch::ProcessGroupMlap2p;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "libmlap2p as a torch.distributed backend (see mlap2p_torch)";
  // The base class is torch's; make sure its binding is loaded.
  py::module::import("torch.distributed");

  py::class_<ProcessGroupMlap2p, c10d::ProcessGroup,
             c10::intrusive_ptr<ProcessGroupMlap2p>>(m, "ProcessGroupMlap2p")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank,
                       int size, std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupMlap2p>(store, rank, size,
                                                            timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
           "A new communicator; its unique id travels through the store.")
      .def_static(
          "split",
          [](ProcessGroupMlap2p& parent, int color, int key, int rank,
             int size, std::chrono::milliseconds timeout) {
            return c10::make_intrusive<ProcessGroupMlap2p>(parent, color, key,
                                                           rank, size, timeout);
          },
          py::arg("parent"), py::arg("color"), py::arg("key"),
          py::arg("rank"), py::arg("size"), py::arg("timeout"),
          py::call_guard<py::gil_scoped_release>(),
          "A child of parent by ncclCommSplit (collective over parent).")
      .def("split_nocolor", &ProcessGroupMlap2p::splitNoColor,
           py::call_guard<py::gil_scoped_release>(),
           "ncclCommSplit with NCCL_SPLIT_NOCOLOR: this rank is in no child.")
      .def("abort", &ProcessGroupMlap2p::abortComm, py::arg("why"),
           py::call_guard<py::gil_scoped_release>(),
           "Abort the communicator; pending and later work fails with why.")
      .def("describe", &ProcessGroupMlap2p::describe)
      .def_property_readonly("inline_bytes", &ProcessGroupMlap2p::inlineBytes);

  m.def("nccl_version", [] {
    int v = 0;
    ncclResult_t r = ncclGetVersion(&v);
    TORCH_CHECK(r == ncclSuccess, "mlap2p: ncclGetVersion failed");
    return v;
  });
}
