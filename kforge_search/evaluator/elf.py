"""A small ELF reader: the dynamic symbols of a shared object, as the dynamic loader sees them.

It reads the program headers and the dynamic segment (not the section headers, which a linker
script can make say anything): DT_SYMTAB/DT_STRTAB for the symbols, DT_VERSYM/DT_VERNEED for
the version and library each import is bound to, DT_NEEDED for the libraries. Standard
library only; ELF32/ELF64, either byte order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT, DT_SONAME = (
    0, 1, 4, 5, 6, 10, 11, 14,
)  # fmt: skip
DT_GNU_HASH, DT_VERSYM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFE, 0x6FFFFFFF
STB_WEAK = 2
MAX_SYMBOLS = 2_000_000  # a bound on a count read from the file


class ElfError(ValueError):
    """The file is not an ELF shared object this reader understands."""


@dataclass(frozen=True)
class DynamicSymbol:
    """One .dynsym entry: `defined` is False for an import; `version`/`library` come from the
    version-needed table (empty when the import names no version)."""

    name: str
    defined: bool
    weak: bool = False
    version: str = ""
    library: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Error: a dynamic symbol needs a name")


@dataclass(frozen=True)
class DynamicInfo:
    soname: str
    needed: tuple[str, ...]
    symbols: tuple[DynamicSymbol, ...]

    @property
    def imports(self) -> tuple[DynamicSymbol, ...]:
        return tuple(s for s in self.symbols if not s.defined)


class _Image:
    """The file's bytes with its byte order, word size and the loadable segments' mapping."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or len(data) < 64:
            raise ElfError("not an ELF file")
        if data[4] not in (1, 2) or data[5] not in (1, 2):
            raise ElfError(f"unknown ELF class {data[4]} or byte order {data[5]}")
        self.data = data
        self.is64 = data[4] == 2
        self.order = "<" if data[5] == 1 else ">"
        self.word = "Q" if self.is64 else "I"
        self.segments: list[tuple[int, int, int, int]] = []  # (type, offset, vaddr, filesz)
        if self.is64:
            phoff, phentsize, phnum = self.unpack("Q", 32)[0], *self.unpack("HH", 54)
        else:
            phoff, phentsize, phnum = self.unpack("I", 28)[0], *self.unpack("HH", 42)
        for i in range(phnum):
            at = phoff + i * phentsize
            if self.is64:
                p_type, _, off, vaddr, _, filesz = self.unpack("IIQQQQ", at)
            else:
                p_type, off, vaddr, _, filesz = self.unpack("IIIII", at)
            self.segments.append((p_type, off, vaddr, filesz))

    def unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        try:
            return struct.unpack_from(self.order + fmt, self.data, offset)
        except struct.error as exc:
            raise ElfError(f"truncated at offset {offset}") from exc

    def offset(self, vaddr: int) -> int:
        """The file offset of a virtual address, through the PT_LOAD segments."""
        for p_type, off, start, filesz in self.segments:
            if p_type == PT_LOAD and start <= vaddr < start + filesz:
                return vaddr - start + off
        raise ElfError(f"address {vaddr:#x} lies in no loadable segment")

    def cstring(self, offset: int) -> str:
        end = self.data.find(b"\0", offset)
        if offset < 0 or end < 0:
            raise ElfError(f"string at {offset} is not terminated")
        return self.data[offset:end].decode("utf-8", "replace")


def read_dynamic(path: str | Path) -> DynamicInfo:
    """The dynamic symbols, needed libraries and soname of the shared object at `path`."""
    image = _Image(Path(path).read_bytes())
    dynamic = [seg for seg in image.segments if seg[0] == PT_DYNAMIC]
    if not dynamic:
        raise ElfError("no dynamic segment (a static executable?)")
    tags: dict[int, list[int]] = {}
    _, at, _, size = dynamic[0]
    step = 16 if image.is64 else 8
    for entry in range(at, at + size, step):
        tag, value = image.unpack("q" + image.word if image.is64 else "iI", entry)
        if tag == DT_NULL:
            break
        tags.setdefault(tag, []).append(value)
    if DT_SYMTAB not in tags or DT_STRTAB not in tags:
        raise ElfError("no dynamic symbol table")
    strtab = image.offset(tags[DT_STRTAB][0])
    soname = image.cstring(strtab + tags[DT_SONAME][0]) if DT_SONAME in tags else ""
    needed = tuple(image.cstring(strtab + v) for v in tags.get(DT_NEEDED, []))
    versions = _versions_needed(image, tags, strtab)
    return DynamicInfo(soname, needed, tuple(_symbols(image, tags, strtab, versions)))


def _symbol_count(image: _Image, tags: dict[int, list[int]]) -> int:
    if DT_HASH in tags:  # nchain is the number of symbols
        return image.unpack("I", image.offset(tags[DT_HASH][0]) + 4)[0]
    if DT_GNU_HASH in tags:  # the highest index in a bucket, then to the end of its chain
        at = image.offset(tags[DT_GNU_HASH][0])
        nbuckets, symoffset, bloom_size, _ = image.unpack("IIII", at)
        buckets = at + 16 + bloom_size * (8 if image.is64 else 4)
        top = max(image.unpack(f"{nbuckets}I", buckets), default=0) if nbuckets else 0
        if top < symoffset:
            return symoffset
        chains = buckets + 4 * nbuckets
        while not image.unpack("I", chains + 4 * (top - symoffset))[0] & 1:
            top += 1
        return top + 1
    symtab, strtab = tags[DT_SYMTAB][0], tags[DT_STRTAB][0]  # the usual layout: strings next
    entsize = tags.get(DT_SYMENT, [24 if image.is64 else 16])[0]
    return max(strtab - symtab, 0) // max(entsize, 1)


def _versions_needed(
    image: _Image, tags: dict[int, list[int]], strtab: int
) -> dict[int, tuple[str, str]]:
    """Version index -> (version name, library file), from the version-needed entries."""
    found: dict[int, tuple[str, str]] = {}
    if DT_VERNEED not in tags:
        return found
    at = image.offset(tags[DT_VERNEED][0])
    for _ in range(tags.get(DT_VERNEEDNUM, [0])[0]):
        _, count, file_off, aux, following = image.unpack("HHIII", at)
        library = image.cstring(strtab + file_off)
        entry = at + aux
        for _ in range(count):
            _, _, index, name_off, next_aux = image.unpack("IHHII", entry)
            found[index & 0x7FFF] = (image.cstring(strtab + name_off), library)
            if not next_aux:
                break
            entry += next_aux
        if not following:
            break
        at += following
    return found


def _symbols(
    image: _Image,
    tags: dict[int, list[int]],
    strtab: int,
    versions: dict[int, tuple[str, str]],
) -> list[DynamicSymbol]:
    count = _symbol_count(image, tags)
    if count > MAX_SYMBOLS:
        raise ElfError(f"implausible symbol count {count}")
    symtab = image.offset(tags[DT_SYMTAB][0])
    entsize = 24 if image.is64 else 16
    versym = image.offset(tags[DT_VERSYM][0]) if DT_VERSYM in tags else None
    out = []
    for index in range(1, count):
        at = symtab + index * entsize
        if image.is64:
            name_off, info, _, shndx = image.unpack("IBBH", at)
        else:
            name_off, _, _, info, _, shndx = image.unpack("IIIBBH", at)
        if not name_off:
            continue
        name = image.cstring(strtab + name_off)
        version, library = ("", "")
        if versym is not None and shndx == 0:  # an import's index names a needed version
            key = image.unpack("H", versym + 2 * index)[0] & 0x7FFF
            version, library = versions.get(key, ("", ""))
        out.append(DynamicSymbol(name, shndx != 0, info >> 4 == STB_WEAK, version, library))
    return out
