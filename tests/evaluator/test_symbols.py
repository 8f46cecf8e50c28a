"""The binary check of native extensions: the ELF reader, C++ names, the allowlist, the audit.

Small shared objects are built from C with the system compiler (milliseconds); the torch
extensions built elsewhere by the suite are checked end to end in tests/adversarial/.
"""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from kforge_search.evaluator import elf, native_audit, symbols
from kforge_search.evaluator.elf import DynamicSymbol
from tests.conftest import ROOT

CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler")

# imports every extension built by load_inline has (seen in the honest cpu-cpp builds)
HONEST = [
    ("_ZNK2at10TensorBase8data_ptrIfEEPT_v", ""),
    ("_ZNK2at10TensorBase8data_ptrIlEEPT_v", ""),
    ("_ZNK2at10TensorBase21__dispatch_contiguousEN3c1012MemoryFormatE", ""),
    ("_ZN2at4_ops10empty_like4callERKNS_6TensorESt8optionalIN3c1010ScalarTypeEES5_INS6_6Layout"
     "EES5_INS6_6DeviceEES5_IbES5_INS6_12MemoryFormatEE", ""),
    ("_ZN2at4_ops19empty_memory_format4callEN3c108ArrayRefINS2_6SymIntEEESt8optionalINS2_10Scala"
     "rTypeEES6_INS2_6LayoutEES6_INS2_6DeviceEES6_IbES6_INS2_12MemoryFormatEE", ""),
    ("_ZN3c104impl23ExcludeDispatchKeyGuardC1ENS_14DispatchKeySetE", ""),
    ("_ZN3c104impl23ExcludeDispatchKeyGuardD1Ev", ""),
    ("_ZN3c104impl22getGlobalPyInterpreterEv", ""),
    ("_ZN3c106detail14torchCheckFailEPKcS2_jS2_", ""),
    ("_ZN3c1010TensorImpl17set_autograd_metaESt10unique_ptrINS_21AutogradMetaInterfaceESt14defa"
     "ult_deleteIS2_EE", ""),
    ("_ZN3c1019UndefinedTensorImpl10_singletonE", ""),
    ("_ZN6caffe28TypeMeta26error_unsupported_typemetaES0_", ""),
    ("_ZN3c106detail19maybe_wrap_dim_slowIlEET_S2_S2_b", ""),
    ("_ZN8pybind116detail11type_casterIN2at6TensorEvE4loadENS_6handleEb", ""),
    ("_ZN5torch16PyWarningHandlerC1Ev", ""),
    ("_ZN5torch29translate_exception_to_pythonERKNSt15__exception_ptr13exception_ptrE", ""),
    ("_ZTVN5torch8autograd12AutogradMetaE", ""),
    ("_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev", ""),
    ("_ZTVN10__cxxabiv117__class_type_infoE", "CXXABI_1.3"),
    ("_ZTISt9bad_alloc", "GLIBCXX_3.4"),
    ("_Znwm", "GLIBCXX_3.4"),
    ("_ZdlPvm", "CXXABI_1.3.9"),
    ("__cxa_throw", "CXXABI_1.3"),
    ("_Unwind_Resume", "GCC_3.0"),
    ("GOMP_parallel", "GOMP_4.0"),
    ("omp_get_thread_num", "OMP_1.0"),
    ("fmaxf", "GLIBC_2.2.5"),
    ("memcpy", "GLIBC_2.14"),
    ("__tls_get_addr", "GLIBC_2.3"),
    ("__gmon_start__", ""),
    # GCC's transactional-memory hooks, weak in every C++ object of some toolchains (H100's)
    ("_ZGTtnam", ""),
    ("_ZGTtdlPv", ""),
    ("_ITM_addUserCommitAction", ""),
    ("PyTuple_New", ""),
    ("_Py_Dealloc", ""),
    ("PyObject_CallFunctionObjArgs", ""),  # pybind11's own module cache
    ("PyObject_CallObject", ""),  # pybind11 of the H100 machine's torch 2.11
    ("PyImport_ImportModule", ""),  # py::module_::import
    # CUDA C++: the runtime's launch API, streams and device properties
    ("cudaLaunchKernel", "libcudart.so.12"),
    ("__cudaRegisterFunction", "libcudart.so.12"),
    ("__cudaPushCallConfiguration", ""),
    ("_ZN3c104cuda20getCurrentCUDAStreamEa", ""),
    ("_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib", ""),
    ("_ZN2at4cuda26getCurrentDevicePropertiesEv", ""),
    # allowed ATen operators (allocation, views, copies) and parallel_for
    ("_ZN2at4_ops4view4callERKNS_6TensorEN3c108ArrayRefINS5_6SymIntEEE", ""),
    ("_ZN2at4_ops8to_dtype4callERKNS_6TensorEN3c1010ScalarTypeEbbSt8optionalINS5_12Memory"
     "FormatEE", ""),
    ("_ZN2at4_ops12fill__Scalar4callERNS_6TensorERKN3c106ScalarE", ""),
    ("_ZN2at15get_num_threadsEv", ""),
    ("_ZN2at8internal21lazy_init_num_threadsEv", ""),
    ("_ZN2at3cpu17is_avx2_supportedEv", ""),
    ("_ZN2at6Tensor5indexEN3c108ArrayRefINS_8indexing11TensorIndexEEE", ""),
    ("Sleef_expf8_u10", ""),
]  # fmt: skip

# (symbol, version, words the verdict must use)
DENIED = [
    ("_ZN2at4_ops2mm4callERKNS_6TensorES4_", "", "aten.mm"),
    ("_ZN2at4_ops5addmm4callERKNS_6TensorES4_S4_RKN3c106ScalarES8_", "", "aten.addmm"),
    ("_ZN2at4_ops6matmul4callERKNS_6TensorES4_", "", "aten.matmul"),
    ("_ZN2at4_ops10empty_like10redispatchEN3c1014DispatchKeySetERKNS_6TensorE", "", "redispatch"),
    ("_ZN2at3cpu2mmERKNS_6TensorES3_", "", "at::cpu"),
    ("_ZN2at6native4reluERKNS_6TensorE", "", "at::native"),
    ("_ZN2at6Tensor5relu_Ev", "", "Tensor::relu_"),
    ("_ZN2at4cuda4blas4gemmIfEEvcclllN3c1010OpMathTypeIT_E4typeEPKS5_lS9_lS6_PS5_l", "", "cuBLAS"),
    ("_ZN2at4cuda24getCurrentCUDABlasHandleEv", "", "cuBLAS"),
    ("_ZN3c1010Dispatcher9singletonEv", "", "dispatcher"),
    ("_ZN3c104impl23IncludeDispatchKeyGuardC1ENS_14DispatchKeySetE", "", "guard"),
    ("_ZN3c104impl29tls_set_dispatch_key_excludedENS_11DispatchKeyEb", "", "guard"),
    ("_ZN5torch7LibraryC1ENS0_4KindESsSt8optionalIN3c1011DispatchKeyEEPKcj", "", "dispatcher"),
    ("_ZN6fbgemm12fbgemmPackedEv", "", "FBGEMM"),
    ("sgemm_", "", "BLAS"),
    ("SGEMM", "", "BLAS"),
    ("cblas_sgemm", "", "BLAS"),
    ("mkl_blas_sgemm", "", "BLAS"),
    ("dlopen", "GLIBC_2.34", "dynamic loading"),
    ("dlsym", "GLIBC_2.34", "dynamic loading"),
    ("dl_iterate_phdr", "GLIBC_2.2.5", "dynamic loading"),
    ("cublasSgemm_v2", "libcublas.so.12", "cuBLAS"),
    ("cublasLtMatmul", "", "cuBLAS"),
    ("cudnnConvolutionForward", "", "cuDNN"),
    ("dnnl_sgemm", "", "oneDNN"),
    ("aoti_torch_cpu_mm_out", "", "C shim"),
    ("PyRun_SimpleString", "", "Python"),
    ("cuLaunchKernel", "", "driver"),
    ("cudaGetDriverEntryPoint", "libcudart.so.12", "loading CUDA code"),
    ("my_helper", "", "allowlist"),
    ("_ZN5torch2nn10LinearImpl7forwardERKN2at6TensorE", "", "allowlist"),
    ("_ZN2at9Something4callEv", "", "allowlist"),
]  # fmt: skip


def _compile(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    (tmp_path / f"{name}.c").write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run(
        [CC, "-shared", "-fPIC", "-O1", str(tmp_path / f"{name}.c"), "-o", str(out), *flags],
        check=True,
        capture_output=True,
    )
    return out


BLAS_SOURCE = """
#include <dlfcn.h>
#include <math.h>
extern void sgemm_(const char*, const char*, const int*);
double kforge_probe(double x) { int n = 1; sgemm_("N", "N", &n); return cos(x); }
void* kforge_find(void) { return dlsym(dlopen(0, RTLD_LAZY), "kforge_probe"); }
"""


@pytest.fixture(scope="module")
def blas_so(tmp_path_factory) -> Path:
    if CC is None:
        pytest.skip("needs a C compiler")
    return _compile(tmp_path_factory.mktemp("elf"), "probe", BLAS_SOURCE, "-lm", "-ldl")


# --- the ELF reader ------------------------------------------------------------------------


@needs_cc
def test_reader_lists_imports_with_their_versions_and_libraries(blas_so):
    info = elf.read_dynamic(blas_so)
    imports = {s.name: s for s in info.imports}
    assert {"sgemm_", "cos", "dlopen", "dlsym"} <= set(imports)
    assert imports["sgemm_"].version == "" and imports["sgemm_"].library == ""
    assert imports["cos"].version.startswith("GLIBC_") and imports["cos"].library == "libm.so.6"
    defined = {s.name for s in info.symbols if s.defined}
    assert {"kforge_probe", "kforge_find"} <= defined
    assert "libm.so.6" in info.needed and "libc.so.6" in info.needed


@needs_cc
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_reader_agrees_with_nm(blas_so):
    listed = subprocess.run(
        ["nm", "-D", "--undefined-only", str(blas_so)], capture_output=True, text=True, check=True
    ).stdout.split()
    expected = sorted(x for x in listed if x not in ("U", "w", "v"))
    mine = sorted(
        s.name + (f"@{s.version}" if s.version else "") for s in elf.read_dynamic(blas_so).imports
    )
    assert mine == expected


@needs_cc
def test_reader_reads_the_dynamic_segment_not_the_section_headers(blas_so, tmp_path):
    """What the loader reads decides: a file whose section headers are gone reads the same."""
    data = bytearray(blas_so.read_bytes())
    assert data[4] == 2, "this test edits an ELF64 header"
    order = "<" if data[5] == 1 else ">"
    struct.pack_into(order + "Q", data, 40, 0)  # e_shoff
    struct.pack_into(order + "HHH", data, 58, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    stripped = tmp_path / "stripped.so"
    stripped.write_bytes(bytes(data))
    assert elf.read_dynamic(stripped) == elf.read_dynamic(blas_so)


def test_reader_refuses_what_is_not_elf(tmp_path):
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"#!/bin/sh\necho not a library\n" * 4)
    with pytest.raises(elf.ElfError, match="not an ELF"):
        elf.read_dynamic(junk)
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 57)  # a header and nothing behind it
    with pytest.raises(elf.ElfError):
        elf.read_dynamic(truncated)


# --- C++ names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mangled", "path", "shown"),
    [
        ("_ZN2at4_ops5addmm4callERKNS_6TensorES4_S4_RKN3c106ScalarES8_",
         ("at", "_ops", "addmm", "call"), "at::_ops::addmm::call"),
        ("_ZNK2at10TensorBase8data_ptrIfEEPT_v", ("at", "TensorBase", "data_ptr"),
         "at::TensorBase::data_ptr"),
        ("_ZNK2at10TensorBase4nameB5cxx11Ev", ("at", "TensorBase", "name"),
         "at::TensorBase::name"),
        ("_ZN3c104impl23ExcludeDispatchKeyGuardC1ENS_14DispatchKeySetE",
         ("c10", "impl", "ExcludeDispatchKeyGuard", "<init>"),
         "c10::impl::ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard"),
        ("_ZN3c104impl23ExcludeDispatchKeyGuardD1Ev",
         ("c10", "impl", "ExcludeDispatchKeyGuard", "~"),
         "c10::impl::ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard"),
        ("_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev",
         ("std", "__cxx11", "basic_ostringstream"), "std::__cxx11::basic_ostringstream"),
        ("_ZTVN10__cxxabiv117__class_type_infoE", ("__cxxabiv1", "__class_type_info"),
         "vtable for __cxxabiv1::__class_type_info"),
        ("_ZTISt9bad_alloc", ("std", "bad_alloc"), "typeinfo for std::bad_alloc"),
        ("_Znwm", ("operator nw",), "operator nw"),
        ("_ZN2at3cpu2mmERKNS_6TensorES3_", ("at", "cpu", "mm"), "at::cpu::mm"),
        ("_ZN3c10lsERSoNS_10DeviceTypeE", ("c10", "operator ls"), "c10::operator ls"),
    ],
)  # fmt: skip
def test_cpp_names(mangled, path, shown):
    name = symbols.cpp_name(mangled)
    assert name is not None and name.path == path
    assert symbols.readable(mangled) == shown


def test_c_names_are_not_cpp_names():
    assert symbols.cpp_name("sgemm_") is None
    assert symbols.cpp_name("_ZGVdN8v_expf") is None  # libmvec's vector variant of expf
    assert symbols.readable("sgemm_") == "sgemm_"


# --- the allowlist -------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "version"), HONEST)
def test_what_honest_extensions_import_is_allowed(name, version):
    verdict = symbols.classify(DynamicSymbol(name, defined=False, version=version))
    assert verdict.allowed, f"{symbols.readable(name)}: {verdict.why}"


@pytest.mark.parametrize(("name", "version", "words"), DENIED)
def test_library_compute_is_denied_by_name(name, version, words):
    verdict = symbols.classify(DynamicSymbol(name, defined=False, version=version))
    assert not verdict.allowed, symbols.readable(name)
    assert words.lower() in verdict.why.lower(), verdict.why


def test_c_names_are_held_against_what_the_system_libraries_export():
    """With the process's libraries known, a C name passes only if one of them exports it:
    a version tag alone (GLIBC_2.2.5 on an import of cblas_sgemm) does not vouch for it."""
    system = frozenset({"fmaxf", "memcpy", "dlopen", "dlsym"})

    def judged(name: str) -> symbols.Verdict:
        return symbols.classify(DynamicSymbol(name, False, version="GLIBC_2.2.5"), system)

    assert judged("fmaxf").allowed
    assert not judged("dlopen").allowed  # exported by glibc, refused by name
    assert "BLAS" in judged("cblas_sgemm").why
    assert not judged("my_helper").allowed
    assert symbols.classify(DynamicSymbol("my_helper", False, version="GLIBC_2.2.5")).allowed


def test_aten_operators_are_judged_by_the_recorders_allowlist():
    names = {"mm": "mm", "empty_like": "empty_like", "weird_op": "weird_op"}.get

    def op(struct_name: str) -> symbols.Verdict:
        return symbols.judge_cpp(symbols.CppName(("at", "_ops", struct_name, "call")), names)

    assert op("empty_like").allowed
    assert "aten.mm" in op("mm").why and not op("mm").allowed
    assert not op("unknown_op").allowed  # not a known operator: refused
    real = symbols.torch_operator_names()
    assert real["addmm_out"] == "addmm" and real["to_dtype"] == "to"
    assert real["fill__Scalar"] == "fill_" and real["empty_memory_format"] == "empty"


# --- reports and the audit -----------------------------------------------------------------


@needs_cc
def test_check_binary_names_each_denied_import(blas_so):
    report = native_audit.check_binary(blas_so, native_audit.system_exports())
    assert not report.ok and report.imports >= 4
    named = {d.readable for d in report.denied}
    assert named == {"sgemm_", "dlopen", "dlsym"}, report.denied
    message = report.message()
    assert "probe.so" in message and "sgemm_ (BLAS" in message and "dlsym (dynamic" in message


def test_an_unreadable_extension_is_not_passed(tmp_path):
    fake = tmp_path / "fake.so"
    fake.write_bytes(b"not elf" * 20)
    report = native_audit.check_binary(fake)
    assert not report.ok and "could not be checked" in report.message()


def test_system_libraries_are_found_in_the_process():
    names = native_audit.system_exports()
    assert names is not None and {"malloc", "memcpy", "cos"} <= names
    libraries = native_audit.process_libraries()
    assert any(Path(p).name.startswith("libc.so") for p in libraries), libraries


@needs_cc
def test_the_sweep_checks_every_extension_mapped_from_a_watched_folder(tmp_path):
    """However the candidate loads its .so (ctypes here), the sweep finds it in the process."""
    source = "#include <dlfcn.h>\nvoid* kforge_swept(void) { return dlopen(0, RTLD_LAZY); }\n"
    loaded = _compile(tmp_path, "swept", source, "-ldl")
    ctypes.CDLL(str(loaded))
    outside = native_audit.NativeAudit([tmp_path / "elsewhere"])
    outside.sweep()
    assert outside.message() == ""
    audit = native_audit.NativeAudit([tmp_path])
    audit.sweep()
    assert [Path(r.path).name for r in audit.failures()] == ["swept.so"]
    assert "dlopen (dynamic loading" in audit.message()
    assert "write the computation yourself" in audit.message()


@needs_cc
def test_a_checked_extension_is_read_once(blas_so):
    audit = native_audit.NativeAudit()
    first = audit.check(blas_so)
    assert audit.check(blas_so) is first


@pytest.mark.slow
def test_common_honest_cpp_idioms_pass():
    """One extension with what honest C++ candidates use (allocation, views, accessors,
    AT_DISPATCH, at::parallel_for, OpenMP, Vectorized, libm, from_blob, TensorIndex
    slicing): built with load_inline (about a minute here), every import is allowed."""
    import torch
    from torch.utils.cpp_extension import load_inline

    from kforge_search.paths import cache_dir

    build = cache_dir() / "torch_extensions" / "kforge_test_honest_idioms"
    build.mkdir(parents=True, exist_ok=True)
    source = (ROOT / "tests" / "fixtures" / "native" / "honest_idioms.cpp").read_text()
    ext = load_inline(
        name="kforge_test_honest_idioms",
        cpp_sources=source,
        functions=["idioms"],
        extra_cflags=["-O3", "-fopenmp"],
        extra_ldflags=["-fopenmp"],
        build_directory=str(build),
    )
    assert ext.idioms(torch.randn(5, 7), torch.randn(3, 7)).shape == (5, 7)
    report = native_audit.check_binary(ext.__file__, native_audit.system_exports())
    assert report.ok, report.message()


def test_the_audit_reads_the_system_libraries_again_when_one_is_mapped(monkeypatch):
    """An extension can bring a system library in (libmvec, the CUDA runtime): its exports
    count from the next check on; an unchanged set is not read twice."""
    mapped = [["/usr/lib/libc.so.6"]]
    reads: list[list[str]] = []
    monkeypatch.setattr(native_audit, "process_libraries", lambda untrusted=(): mapped[0])
    monkeypatch.setattr(
        native_audit,
        "system_exports",
        lambda untrusted=(), libraries=None: reads.append(list(libraries)) or frozenset(),
    )
    audit = native_audit.NativeAudit()
    audit.system()
    audit.system()
    mapped[0] = ["/usr/lib/libc.so.6", "/usr/lib/libmvec.so.1"]
    audit.system()
    assert reads == [["/usr/lib/libc.so.6"], ["/usr/lib/libc.so.6", "/usr/lib/libmvec.so.1"]]
