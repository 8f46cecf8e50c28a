"""Native code checked at the binary: what a built extension imports must be on an allowlist.

A C++/CUDA candidate can reach library compute that the op recorder never sees: ATen's
kernels called directly (at::cpu::mm, at::native::*), an ATen operator under a dispatch-key
guard, BLAS symbols libtorch exports (sgemm_, cblas_*), cuBLAS/cuDNN, or code found at run
time with dlopen/dlsym. Every import of the extension's .so (its undefined dynamic symbols,
read by evaluator/elf.py) is classified here; anything not recognized as allocation, tensor
metadata, data pointers, parallel_for, OpenMP, libc/libm/libstdc++, pybind11/Python glue or
the CUDA runtime's launch API is refused, by name. docs/evaluator.md lists the rule.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from kforge_search.evaluator.elf import DynamicSymbol
from kforge_search.evaluator.guards import ALLOWED_OPS

# --- Itanium C++ names ---------------------------------------------------------------------

_STD_ABBREVIATIONS = {
    "Sa": ("std", "allocator"), "Sb": ("std", "basic_string"), "Ss": ("std", "string"),
    "Si": ("std", "istream"), "So": ("std", "ostream"), "Sd": ("std", "iostream"),
}  # fmt: skip
_SPECIAL = {"TV": "vtable for ", "TI": "typeinfo for ", "TS": "typeinfo name for ",
            "TT": "VTT for ", "TH": "TLS init for ", "TW": "TLS wrapper for ",
            "GV": "guard variable for "}  # fmt: skip
_VECTOR_VARIANT = re.compile(r"_ZGV[a-zA-Z]")  # libmvec's _ZGVdN8v_expf: a C name, not C++


@dataclass(frozen=True)
class CppName:
    """The leading qualified name of a mangled symbol: ("at", "_ops", "mm", "call").

    The walk stops at template arguments, a constructor/destructor ("<init>"/"~", recorded)
    or an operator ("operator ls"); `special` is "vtable for " and the like."""

    path: tuple[str, ...]
    special: str = ""

    def readable(self) -> str:
        parts = list(self.path)
        if parts and parts[-1] in ("<init>", "~") and len(parts) > 1:
            parts[-1] = ("~" if parts[-1] == "~" else "") + parts[-2]
        return self.special + "::".join(parts)


def cpp_name(symbol: str) -> CppName | None:
    """The C++ name of an Itanium-mangled symbol, or None for a C name."""
    if not symbol.startswith("_Z") or _VECTOR_VARIANT.match(symbol):
        return None
    rest, special = symbol[2:], ""
    if rest[:2] in _SPECIAL:
        rest, special = rest[2:], _SPECIAL[rest[:2]]
    elif rest[:2] in ("Th", "Tv"):  # thunks: a call offset, then the function
        offset = re.match(r"T[hv]n?\d+_(?:n?\d+_)?", rest)
        rest, special = (rest[offset.end() :] if offset else ""), "thunk to "
    if rest.startswith("N"):
        start = 1
        while start < len(rest) and rest[start] in "rVKRO":  # cv- and ref-qualifiers
            start += 1
        return CppName(_components(rest, start, nested=True), special)
    return CppName(_components(rest, 0, nested=False), special)


def _components(s: str, i: int, nested: bool) -> tuple[str, ...]:
    path: list[str] = []
    while i < len(s):
        c = s[i]
        if c.isdigit():
            digits = re.match(r"\d+", s[i:])
            assert digits is not None
            start = i + digits.end()
            path.append(s[start : start + int(digits.group())])
            i = start + int(digits.group())
        elif s.startswith("St", i):
            path.append("std")
            i += 2
            continue  # "St" prefixes the next component
        elif c == "S" and not path and s[i : i + 2] in _STD_ABBREVIATIONS:
            path.extend(_STD_ABBREVIATIONS[s[i : i + 2]])
            i += 2
        elif c == "L" and s[i + 1 : i + 2].isdigit():  # internal linkage
            i += 1
            continue
        elif c == "B" and path:  # an ABI tag ([abi:cxx11]) after a name
            tag = re.match(r"B(\d+)", s[i:])
            if tag is None:
                break
            i += tag.end() + int(tag.group(1))
            continue
        elif c in "CD" and path and (s[i + 1 : i + 2].isdigit() or s[i + 1 : i + 2] == "I"):
            path.append("~" if c == "D" else "<init>")
            break
        elif c.islower() and s[i + 1 : i + 2].isalpha():
            path.append("operator " + s[i : i + 2])
            break
        else:
            break  # template arguments, a local name, an unnamed type: enough is known
        if not nested:
            break
    return tuple(path)


# --- the allowlist -------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    why: str  # what the symbol is: "ATen operator that computes", "C++ runtime", ...


def allow(why: str) -> Verdict:
    return Verdict(True, why)


def deny(why: str) -> Verdict:
    return Verdict(False, why)


UNRECOGNIZED = "not on the allowlist of native imports"

# Tensor methods that are metadata, data pointers or views/copies (ATen operators in
# ALLOWED_OPS are allowed as methods too).
TENSOR_METHODS = frozenset(
    {
        "data_ptr", "const_data_ptr", "mutable_data_ptr", "__dispatch_contiguous", "toString",
        "print", "name", "enforce_invariants", "_version", "is_leaf", "output_nr", "is_view",
        "_base", "data", "tensor_data", "variable_data", "options", "expect_contiguous",
        "sizes", "strides", "sym_sizes", "sym_strides", "dim", "numel", "storage_offset",
        "nbytes", "itemsize", "element_size", "scalar_type", "dtype", "device", "layout",
        "is_contiguous", "is_non_overlapping_and_dense", "suggest_memory_format", "defined",
        "requires_grad_", "retains_grad", "grad_fn", "storage", "has_storage", "get_device",
        "unsafeGetTensorImpl", "getIntrusivePtr", "accessor", "packed_accessor32",
        "packed_accessor64", "generic_packed_accessor", "use_count", "reset",
        # indexing with TensorIndex lists (slices, or tensors: a gather): the operators it
        # dispatches are the recorder's to judge
        "index", "index_put_",
    }
)  # fmt: skip
# ATen functions outside at::_ops: threads and parallel_for, allocation helpers, argument
# checks, shape inference, TensorIterator (its loops are the candidate's), the profiler.
AT_FUNCTIONS = frozenset(
    {
        "get_num_threads", "set_num_threads", "get_thread_num", "in_parallel_region",
        "init_num_threads", "get_num_interop_threads", "intraop_default_num_threads",
        "intraop_launch", "intraop_launch_future", "launch", "globalContext", "Context",
        "getCPUAllocator", "print", "operator ls", "tensor", "TensorMaker", "maybe_data_ptr",
        "infer_size", "infer_size_dimvector", "infer_size_symdimvector", "infer_size_symint",
        "inferExpandGeometry", "inferExpandGeometry_dimvector", "infer_dense_strides",
        "geometry_is_contiguous", "TensorGeometry", "TensorIterator", "TensorIteratorBase",
        "TensorIteratorConfig", "OperandInfo", "RecordFunction", "getStepCallbacks",
        "getStepCallbacksUnlessEmpty", "isRecordFunctionEnabled", "toAccumulateType",
        "assert_no_internal_overlap", "assert_no_overlap", "assert_no_partial_overlap",
        "has_internal_overlap", "get_overlap_status", "vec", "check_dim_size",
    }
)  # fmt: skip
AT_DETAIL = frozenset(
    {
        "computeStorageNbytes", "computeStorageNbytesContiguous", "computeStride",
        "defaultStrides", "empty_cpu", "empty_generic", "empty_generic_symint",
        "empty_strided_cpu", "empty_strided_generic", "empty_strided_symint_generic",
        "empty_cuda", "empty_strided_cuda", "tensor_cpu", "tensor_backend",
        "scalar_tensor_static",
    }
)  # fmt: skip
AT_INTERNAL = frozenset(
    {"lazy_init_num_threads", "invoke_parallel", "_parallel_run", "set_thread_num",
     "ThreadIdGuard", "GRAIN_SIZE", "OpaqueOptionalTensorRef", "expand_slow_path"}
)  # fmt: skip
# at::cuda: device properties and streams; its BLAS/cuDNN handles and at::cuda::blas are not
AT_CUDA = frozenset(
    {
        "getCurrentDeviceProperties", "getDeviceProperties", "warp_size", "getNumGPUs",
        "is_available", "getCurrentCUDAStream", "getDefaultCUDAStream", "getStreamFromPool",
        "getStreamFromExternal", "setCurrentCUDAStream", "getCUDADeviceAllocator",
        "getPinnedMemoryAllocator", "getDeviceIndexWithPrimaryContext", "canDeviceAccessPeer",
        "device_synchronize", "stream_synchronize", "memcpy_and_sync", "CUDAEvent",
        "CachingHostAllocator_recordEvent", "CachingHostAllocator_emptyCache",
    }
)  # fmt: skip
AT_CPU_INFO = re.compile(r"(is_\w+_supported|L\d\w*_cache_size|get_sve_len|init_amx)$")
# ATen namespaces that hold kernels (at::cpu also answers CPU feature questions: AT_CPU_INFO)
AT_KERNELS = frozenset(
    {
        "native", "cpu", "cuda", "meta", "compositeexplicitautograd",
        "compositeimplicitautograd", "compositeexplicitautogradnonfunctional",
        "compositeimplicitautogradnestedtensor", "functionalization", "functorch", "sparse",
        "indexing", "mps", "xpu",
    }
)  # fmt: skip
# c10: allocation, TensorImpl and storage, symbolic sizes, scalars, devices and streams,
# errors and warnings, type metadata. Its dispatcher and dispatch-key TLS are not.
C10_NAMES = frozenset(
    {
        "Allocator", "AutogradMetaInterface", "AutogradState", "CopyBytes", "DataPtr",
        "DefaultCPUAllocator", "Device", "DeviceAllocator", "DeviceTypeName", "DispatchKeySet",
        "Error", "BufferError", "EnforceFiniteError", "IndexError", "LinAlgError",
        "NotImplementedError", "OutOfMemoryError", "SyntaxError", "TypeError", "ValueError",
        "ErrorAlwaysShowCppStacktrace", "ThrowEnforceNotMet", "ThrowEnforceFiniteNotMet",
        "GetAllocator", "GetCPUAllocator", "GetDefaultCPUAllocator", "GradMode",
        "InefficientStdFunctionContext", "NoDelete", "PlacementDeleteContext", "Scalar",
        "SmallVectorBase", "Storage", "StorageImpl", "Stream", "SymBool", "SymFloat", "SymInt",
        "SymNodeImpl", "ConstantSymNodeImpl", "SymbolicShapeMeta", "TensorImpl",
        "UndefinedTensorImpl", "VariableVersion", "Warning", "WarningHandler", "WarningUtils",
        "alloc_cpu", "free_cpu", "c10_compute_alignment", "demangle", "detail", "get_backtrace",
        "get_lazy_backtrace", "intrusive_ptr_target", "memoryProfilingEnabled",
        "reportMemoryUsageToProfiler", "reportOutOfMemoryToProfiler", "throwNullDataPtrError",
        "warnDeprecatedDataPtr", "toString", "warn", "promoteTypes", "getScalarTypeAbbr",
        "get_default_dtype", "get_default_dtype_as_scalartype", "IValue", "ivalue",
        "ArrayRef", "intrusive_ptr", "weak_intrusive_ptr", "optional", "Half", "BFloat16",
        "TensorOptions", "MemoryFormat", "Layout", "ScalarType", "DeviceType", "DeviceGuard",
        "OptionalDeviceGuard", "StreamGuard", "Event", "SafePyObject", "SafePyHandle",
        "LogAPIUsage", "LogAPIUsageFakeReturn", "ParallelGuard", "cuda", "hip",
    }
)  # fmt: skip
C10_IMPL = frozenset(
    {
        "DeviceGuardImplInterface", "DeviceGuardImplRegistrar", "GPUTrace", "PyInterpreter",
        "PyInterpreterVTable", "PyObjectSlot", "SizesAndStrides", "cow",
        "device_guard_impl_registry", "getDeviceGuardImpl", "VirtualGuardImpl",
        "getGlobalPyInterpreter", "check_python_gil", "common_device_check_failure",
        "ensureCUDADeviceGuardSet", "tls_is_dispatch_key_excluded",
        "tls_is_dispatch_key_included", "tls_is_dispatch_keyset_excluded",
        "tls_is_dispatch_keyset_included",
        # torch's own factory wrappers (torch::empty, torch::empty_like, torch::zeros: the
        # at::AutoDispatchBelowADInplaceOrView they construct inline) build this guard in
        # every extension that allocates; what could run under it is judged by name.
        "ExcludeDispatchKeyGuard",
    }
)  # fmt: skip
C10_DISPATCH = frozenset(
    {"Dispatcher", "OperatorHandle", "TypedOperatorHandle", "OperatorKernel", "KernelFunction",
     "BoxedKernel", "RegisterOperators", "DispatchKeyExtractor", "OperatorEntry",
     "fallthrough_kernel", "ObservedOperators", "OpRegistrationListener", "Library"}
)  # fmt: skip
C10_GUARDS = frozenset(
    {"IncludeDispatchKeyGuard", "ForceDispatchKeyGuard", "_force_tls_local_dispatch_key_set",
     "tls_set_dispatch_key_excluded", "tls_set_dispatch_key_included",
     "raw_local_dispatch_key_set", "TorchDispatchModeTLS", "PythonDispatcherTLS",
     "PythonTorchFunctionTLS", "InferenceMode", "AutoDispatchBelowAutograd",
     "AutoDispatchBelowADInplaceOrView", "AutoNonVariableTypeMode"}
)  # fmt: skip
CPP_RUNTIME = frozenset({"std", "__gnu_cxx", "__cxxabiv1", "pybind11"})
GLOBAL_OPERATORS = frozenset({"operator nw", "operator na", "operator dl", "operator da"})
# torch's Python glue that load_inline's bindings use to pass tensors in and out
TORCH_GLUE = frozenset({"PyWarningHandler", "translate_exception_to_python", "AutogradMeta"})
THP_GLUE = re.compile(
    r"THP(Variable|Device|Dtype|Layout|MemoryFormat|Size|Stream|QScheme|Utils)\w*$"
)
LIBRARY_NAMESPACES = {  # C++ namespaces of compute libraries: named in the message
    "dnnl": "oneDNN", "ideep": "oneDNN", "mkldnn": "oneDNN", "fbgemm": "FBGEMM",
    "cublasLt": "cuBLASLt", "cudnn_frontend": "cuDNN", "xnnpack": "XNNPACK",
    "qnnpack": "QNNPACK", "mkl": "MKL", "sleef": "SLEEF",
}  # fmt: skip

# C names refused whatever library would provide them, each with what it is
DENIED_C = (
    (re.compile(r"(dlopen|dlmopen|dlsym|dlvsym|dladdr1?|dlinfo|dl_iterate_phdr|_dl_\w+|"
                r"__libc_dl\w+)$"), "dynamic loading (finds library code at run time)"),
    (re.compile(r"(cudaGetDriverEntryPoint\w*|cudaLibrary\w*|cuGetProcAddress\w*)$"),
     "loading CUDA code at run time"),
    (re.compile(r"(cblas_|catlas_|LAPACKE_|lapack_|openblas_|goto_|mkl_|MKL_|bli_|blas_|vs[A-Z]|"
                r"vd[A-Z]|vms[A-Z]|vmd[A-Z]|Dfti)"), "BLAS/LAPACK/MKL"),
    (re.compile(r"cublas"), "cuBLAS"),
    (re.compile(r"cudnn"), "cuDNN"),
    (re.compile(r"(cufft|cusparse|cusolver|curand|cutensor|nccl|nvrtc|nvJitLink)"),
     "a CUDA library"),
    (re.compile(r"(dnnl_|mkldnn_)"), "oneDNN"),
    (re.compile(r"(xnn_|nnp_|pytorch_qnnp_|qnnp_|fbgemm|pthreadpool_)"),
     "PyTorch's CPU kernel libraries (XNNPACK, NNPACK, QNNPACK, FBGEMM)"),
    (re.compile(r"aoti_torch_"), "PyTorch's C shim for ATen operators"),
    (re.compile(r"cu[A-Z]\w*$"), "the CUDA driver API"),
    # source text compiled and run from native code; calling Python objects (PyObject_Call*,
    # vectorcall, PyImport_*) is pybind11's daily work in one version or another (the H100
    # machine's torch 2.11 extensions import PyObject_CallObject), and what such a call
    # reaches in torch is the op recorder's to judge, as from Python
    (re.compile(r"(PyRun_|Py_CompileString|PyEval_EvalCode|PyMarshal_|Py_RunMain)"),
     "running Python source from native code"),
)  # fmt: skip
FORTRAN_NAME = re.compile(r"([a-z][a-z0-9]*_|[A-Z][A-Z0-9_]*)$")  # sgemm_, SGEMM, DGEMM_
ALLOWED_C = (
    (re.compile(r"_?Py[A-Z_a-z]\w*$"), "the Python C API"),
    (re.compile(r"(GOMP_|omp_|__kmpc_|kmp_)\w+$"), "OpenMP"),
    (re.compile(r"(cuda[A-Z]\w*|__cuda\w+)$"), "the CUDA runtime"),
    (re.compile(r"Sleef_\w+$"), "vector math (SLEEF, as libm)"),
    (TOOLCHAIN_HOOKS := re.compile(r"(__gmon_start__|_ITM_\w+|_ZGTt\w+|_Jv_RegisterClasses|"
                                   r"__cxa_finalize)$"), "the toolchain's weak hooks"),
)  # fmt: skip
# _ITM_*: libitm, GCC's transactional memory runtime; _ZGTt*: the transaction-safe clones of
# libstdc++'s operator new/delete and exceptions, which its headers reference (weakly) from
# every C++ object on some toolchains (the H100 machine's g++: _ZGTtnam, _ZGTtdlPv,
# _ITM_addUserCommitAction in every builtin extension). Neither computes anything.
# versions that name a system library, trusted where the process's libraries are unknown
SYSTEM_VERSION = re.compile(r"(GLIBC_|GLIBCXX_|CXXABI_|GCC_|GOMP_|OMP_|libcudart)")


def _aten_operator(struct: str, resolve: Callable[[str], str | None]) -> Verdict:
    op = resolve(struct)
    if op is None:
        return deny("an ATen operator this check does not know")
    if op in ALLOWED_OPS:
        return allow("ATen allocation, view, copy or metadata operator")
    return deny(f"an ATen operator that computes (aten.{op})")


@functools.cache
def torch_operator_names() -> dict[str, str]:
    """at::_ops struct name -> ATen operator name (`addmm_out` -> `addmm`), from torch."""
    import torch

    names = {}
    for schema in torch._C._jit_get_all_schemas():
        namespace, _, name = schema.name.partition("::")
        if namespace == "aten":
            overload = schema.overload_name
            names[f"{name}_{overload}" if overload else name] = name
    return names


def _judge_aten(path: tuple[str, ...], resolve: Callable[[str], str | None]) -> Verdict:
    second = path[1] if len(path) > 1 else ""
    rest = path[2] if len(path) > 2 else ""
    if second == "_ops":
        if len(path) > 3 and path[3] == "redispatch":
            return deny("an ATen operator redispatched below dispatch keys")
        return _aten_operator(rest, resolve)
    if second in ("Tensor", "TensorBase"):
        method = rest.removesuffix("_symint")
        if method in TENSOR_METHODS or method in ALLOWED_OPS:
            return allow("tensor metadata, data pointers, views or copies")
        return deny(f"a Tensor method that computes (Tensor::{rest})")
    if second == "cpu" and AT_CPU_INFO.match(rest):
        return allow("CPU feature queries")
    if second == "cuda":
        if rest in AT_CUDA:
            return allow("CUDA device properties and streams")
        return deny("ATen's CUDA libraries (cuBLAS/cuDNN handles, at::cuda::blas)")
    if second in AT_KERNELS:
        return deny(f"ATen's kernels (at::{second})")
    if second == "detail" and rest in AT_DETAIL:
        return allow("ATen allocation")
    if second == "internal" and rest in AT_INTERNAL:
        return allow("at::parallel_for")
    if second in AT_FUNCTIONS:
        return allow("ATen threads, allocation, checks, shape helpers or TensorIterator")
    return deny(UNRECOGNIZED)


def _judge_c10(path: tuple[str, ...]) -> Verdict:
    second = path[1] if len(path) > 1 else ""
    rest = path[2] if len(path) > 2 else ""
    if second in C10_DISPATCH or rest in C10_DISPATCH:
        return deny("the dispatcher (calls operators by name)")
    if second in C10_GUARDS or rest in C10_GUARDS:
        return deny("a dispatch-key guard (hides operators from the recorder)")
    if second == "impl":
        return allow("c10 tensor internals") if rest in C10_IMPL else deny(UNRECOGNIZED)
    if second in C10_NAMES or second.startswith("operator "):
        return allow("c10 core (allocation, TensorImpl, errors, devices, streams)")
    return deny(UNRECOGNIZED)


def judge_cpp(name: CppName, resolve: Callable[[str], str | None]) -> Verdict:
    """A C++ symbol, by its qualified name."""
    path = name.path
    head = path[0] if path else ""
    if not path:
        if name.special in ("typeinfo for ", "typeinfo name for "):
            return allow("type information")
        return deny(UNRECOGNIZED)
    if head in CPP_RUNTIME or (len(path) == 1 and head in GLOBAL_OPERATORS):
        return allow("the C++ runtime and pybind11")
    if head == "at":
        return _judge_aten(path, resolve)
    if head == "c10":
        return _judge_c10(path)
    if head == "caffe2":
        ok = len(path) > 1 and path[1] in ("TypeMeta", "detail")
        return allow("type metadata") if ok else deny(UNRECOGNIZED)
    if head == "torch":
        if path[-1] in TORCH_GLUE or (len(path) > 1 and path[1] in TORCH_GLUE):
            return allow("torch's Python glue")
        if len(path) > 1 and path[1] == "Library":
            return deny("the dispatcher (registers operators)")
        return deny(UNRECOGNIZED)
    if len(path) == 1 and THP_GLUE.match(head):
        return allow("torch's Python glue")
    if head in LIBRARY_NAMESPACES:
        return deny(LIBRARY_NAMESPACES[head])
    return deny(UNRECOGNIZED)


def judge_c(symbol: DynamicSymbol, system: frozenset[str] | None) -> Verdict:
    """A C symbol, by name and by the system library that exports it. `system`: the names
    libc, libm, libstdc++, libgcc_s, libgomp and the CUDA runtime of this process export
    (None where unknown: the version tags are trusted instead)."""
    name = symbol.name
    for pattern, why in DENIED_C[:2]:
        if pattern.match(name):
            return deny(why)
    if system is not None and name in system:
        return allow("the C/C++ system libraries")
    if system is None and symbol.version and SYSTEM_VERSION.match(symbol.version):
        return allow("the C/C++ system libraries")
    for pattern, why in DENIED_C[2:]:
        if pattern.match(name):
            return deny(why)
    for pattern, why in ALLOWED_C:
        if pattern.match(name):
            return allow(why)
    if THP_GLUE.match(name):
        return allow("torch's Python glue")
    if FORTRAN_NAME.match(name):
        return deny("BLAS/LAPACK (a Fortran-style name)")
    return deny(UNRECOGNIZED)


def classify(
    symbol: DynamicSymbol,
    system: frozenset[str] | None = None,
    resolve: Callable[[str], str | None] | None = None,
) -> Verdict:
    """Whether an imported symbol is allowed, and what it is."""
    if TOOLCHAIN_HOOKS.match(symbol.name):  # before demangling: _ZGTt names look like C++
        return allow("the toolchain's weak hooks")
    name = cpp_name(symbol.name)
    if name is None:
        return judge_c(symbol, system)
    return judge_cpp(name, resolve or torch_operator_names().get)


def readable(symbol: str) -> str:
    name = cpp_name(symbol)
    return name.readable() if name is not None and name.path else symbol
