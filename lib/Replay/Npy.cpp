//===- Npy.cpp - NumPy .npy arrays for replay inputs ---------------------===//
//
// The .npy format (version 1.0-3.0): the magic "\x93NUMPY", a version, a header length,
// and an ASCII dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces, followed by the raw row-major data. Only what a dict literal of
// that form needs is parsed; anything else is refused with the reason.
//
//===----------------------------------------------------------------------===//
#include "Replay/Replay.h"

#include "mlir/IR/BuiltinTypes.h"

#include <map>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sys/stat.h>
#include <sstream>

using namespace planproof;

namespace {

/// The header dict of a .npy file parsed as numpy writes it, a Python literal
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`: each of the three keys
/// exactly once and nothing else (a second 'descr' is not silently ignored), values
/// as text (a string's contents, True/False, a tuple with its parentheses).
bool parseDict(const std::string &h, std::map<std::string, std::string> &out,
               std::string &error) {
  size_t i = 0;
  auto ws = [&] {
    while (i < h.size() && (h[i] == ' ' || h[i] == '\n' || h[i] == '\t'))
      ++i;
  };
  auto bad = [&](const std::string &why) {
    error = "malformed header dict: " + why;
    return false;
  };
  auto quoted = [&](std::string &v) {
    if (i >= h.size() || (h[i] != '\'' && h[i] != '"'))
      return false;
    size_t e = h.find(h[i], i + 1);
    if (e == std::string::npos)
      return false;
    v = h.substr(i + 1, e - i - 1);
    i = e + 1;
    return true;
  };
  ws();
  if (i >= h.size() || h[i++] != '{')
    return bad("it does not start with '{'");
  for (;;) {
    ws();
    if (i < h.size() && h[i] == '}') {
      ++i;
      break;
    }
    std::string key, value;
    if (!quoted(key))
      return bad("expected a quoted key");
    ws();
    if (i >= h.size() || h[i++] != ':')
      return bad("expected ':' after '" + key + "'");
    ws();
    if (i < h.size() && (h[i] == '\'' || h[i] == '"')) {
      if (!quoted(value))
        return bad("an unterminated string");
    } else if (i < h.size() && h[i] == '(') {
      size_t e = h.find(')', i);
      if (e == std::string::npos)
        return bad("an unterminated tuple");
      value = h.substr(i, e - i + 1);
      i = e + 1;
    } else {
      size_t b = i;
      while (i < h.size() && std::isalnum((unsigned char)h[i]))
        ++i;
      value = h.substr(b, i - b);
      if (value.empty())
        return bad("expected a value for '" + key + "'");
    }
    if (key != "descr" && key != "fortran_order" && key != "shape")
      return bad("an unknown key '" + key + "'");
    if (!out.emplace(key, value).second)
      return bad("the key '" + key + "' appears twice");
    ws();
    if (i < h.size() && h[i] == ',')
      ++i;
  }
  ws();
  if (i != h.size())
    return bad("text after the dict");
  return true;
}

/// The header dict of an open .npy file, after its magic, version and length.
bool readHeader(std::ifstream &in, std::string &h, std::string &error) {
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    error = "not an .npy file (no \\x93NUMPY magic)";
    return false;
  }
  int major = (unsigned char)magic[6], minor = (unsigned char)magic[7];
  if (minor != 0) {
    error = "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor);
    return false;
  }
  uint32_t hlen = 0;
  unsigned char len[4] = {0, 0, 0, 0};
  if (major == 1) {
    if (!in.read((char *)len, 2)) {
      error = "truncated header";
      return false;
    }
    hlen = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    if (!in.read((char *)len, 4)) {
      error = "truncated header";
      return false;
    }
    hlen = len[0] | (len[1] << 8) | (len[2] << 16) | ((uint32_t)len[3] << 24);
  } else {
    error = "unsupported .npy version " + std::to_string(major);
    return false;
  }
  if (hlen > (1u << 20)) {
    error = "header of " + std::to_string(hlen) + " bytes is too long";
    return false;
  }
  h.assign(hlen, '\0');
  if (!in.read(&h[0], hlen)) {
    error = "truncated header";
    return false;
  }
  return true;
}

/// What the header dict says about the data: its dtype and its shape's text.
struct NpyLayout {
  std::string descr, shapeText;
  char kind = 0; // 'f', 'i', 'u' or 'b'
  int size = 0;  // bytes per element
};

/// The dtype and shape text of header `h`, where they are supported.
bool parseHeader(const std::string &h, NpyLayout &out, std::string &error) {
  std::map<std::string, std::string> dict;
  if (!parseDict(h, dict, error))
    return false;
  std::string descr = dict["descr"], fortran = dict["fortran_order"], shapeText = dict["shape"];
  if (descr.empty() || shapeText.empty() || fortran.empty()) {
    error = "the header dict needs descr, fortran_order and shape";
    return false;
  }
  // '<f4': an order character, a kind and a size, and nothing after them.
  bool wellFormed = descr.size() >= 3 && descr.size() <= 4 &&
                    std::all_of(descr.begin() + 2, descr.end(), ::isdigit);
  if (!wellFormed) {
    error = "unsupported dtype '" + descr + "' (f2, f4, f8, i1-i8, u1-u8 or bool)";
    return false;
  }
  if (fortran != "False") {
    error = "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)";
    return false;
  }
  char endian = descr[0], kind = descr[1];
  int size = std::atoi(descr.c_str() + 2);
  bool little = endian == '<' || endian == '|' || (endian == '=' && size == 1);
  if (!little) {
    error = "dtype '" + descr + "' is not little-endian";
    return false;
  }
  bool ok = (kind == 'f' && (size == 2 || size == 4 || size == 8)) ||
            ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
            (kind == 'b' && size == 1);
  if (!ok) {
    error = "unsupported dtype '" + descr + "' (f2, f4, f8, i1-i8, u1-u8 or bool)";
    return false;
  }
  out = {descr, shapeText, kind, size};
  return true;
}

/// The dimensions of a shape tuple such as "(2, 3)", and their product in `total`.
bool parseShape(const std::string &shapeText, Shape &shape, int64_t &total, std::string &error) {
  shape.clear();
  std::string inner = shapeText.substr(1, shapeText.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  total = 1;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos)
      continue;
    char *end = nullptr;
    long long v = std::strtoll(item.c_str() + b, &end, 10);
    while (end && *end == ' ')
      ++end;
    if (!end || (*end && *end != 'L') || v < 0 || v > (1ll << 40)) {
      error = "bad shape " + shapeText;
      return false;
    }
    shape.push_back(v);
    total *= v;
    if (total > (1ll << 36)) {
      error = "array of shape " + shapeText + " is too large";
      return false;
    }
  }
  return true;
}

/// One little-endian element of dtype `kind` and `size` bytes at `p`, as a double.
double decodeElement(const unsigned char *p, char kind, int size) {
  double v = 0;
  if (kind == 'f' && size == 8) {
    std::memcpy(&v, p, 8);
  } else if (kind == 'f' && size == 4) {
    float f;
    std::memcpy(&f, p, 4);
    v = f;
  } else if (kind == 'f') { // IEEE half
    uint16_t hb = p[0] | (p[1] << 8);
    int e = (hb >> 10) & 31, m = hb & 1023;
    double mag = e == 0 ? std::ldexp((double)m, -24)
                 : e == 31 ? (m ? NAN : INFINITY)
                           : std::ldexp(1024.0 + m, e - 25);
    v = (hb & 0x8000) ? -mag : mag;
  } else {
    uint64_t u = 0;
    for (int k = 0; k < size; ++k)
      u |= (uint64_t)p[k] << (8 * k);
    if (kind == 'i' && size < 8 && (u >> (8 * size - 1)) & 1)
      u |= ~0ull << (8 * size);
    v = kind == 'i' ? (double)(int64_t)u : (double)u;
  }
  return v;
}

} // namespace

bool planproof::readNpy(const std::string &path, Shape &shape, std::vector<double> &data,
                        std::string &error, const Shape *want) {
  // A regular file only (a FIFO would block the open, a device never end).
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "not a regular file";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open";
    return false;
  }
  std::string h;
  NpyLayout l;
  int64_t total = 1;
  if (!readHeader(in, h, error) || !parseHeader(h, l, error) ||
      !parseShape(l.shapeText, shape, total, error))
    return false;
  if (want && shape != *want)
    return true; // (the caller says how the shapes differ; nothing is read)
  // The header's claim is checked against the file before anything is allocated: a
  // 128-byte file claiming 10^12 elements is an error, not a 4 GB allocation.
  std::streamoff at = in.tellg();
  if (at < 0 || (int64_t)st.st_size - at < total * (int64_t)l.size) {
    error = "the header claims " + std::to_string(total) + " elements of '" + l.descr +
            "', more than the file holds";
    return false;
  }
  std::vector<unsigned char> raw((size_t)total * l.size);
  if (!in.read((char *)raw.data(), raw.size())) {
    error = "data ends before " + std::to_string(total) + " elements of '" + l.descr + "'";
    return false;
  }
  data.resize(total);
  for (int64_t i = 0; i < total; ++i)
    data[i] = decodeElement(raw.data() + i * l.size, l.kind, l.size);
  return true;
}

bool planproof::writeNpy(const std::string &path, const Shape &shape,
                         const std::vector<double> &data) {
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 1); // (2, 3) but (4,)
  std::string h = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  unsigned char len[2] = {(unsigned char)(h.size() & 255), (unsigned char)(h.size() >> 8)};
  out.write((const char *)len, 2);
  out.write(h.data(), h.size());
  out.write((const char *)data.data(), data.size() * 8);
  return (bool)out;
}

bool planproof::loadNpyInputs(const Spec &spec, const std::string &dir, ReplayOptions &options,
                              Diagnostics &errors) {
  DIR *d = opendir(dir.c_str());
  if (!d)
    return errors.error({dir}, "cannot open the folder of inputs");
  std::vector<std::string> files;
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 4 && n.substr(n.size() - 4) == ".npy")
      files.push_back(n);
  }
  closedir(d);
  for (const std::string &f : files) {
    std::string name = f.substr(0, f.size() - 4), path = dir + "/" + f;
    int at = -1;
    for (size_t i = 0; i < spec.refInputs.size(); ++i)
      if (spec.refInputs[i] == name)
        at = (int)i;
    if (at < 0) {
      std::string names;
      for (const std::string &n : spec.refInputs)
        names += (names.empty() ? "" : ", ") + n;
      return errors.error({path}, "no reference input is named '" + name + "' (inputs: " +
                                      names + ")");
    }
    Shape shape, want;
    std::vector<double> data;
    std::string why;
    if (auto r = mlir::dyn_cast<mlir::RankedTensorType>(spec.reference.getArgument(at).getType()))
      want.assign(r.getShape().begin(), r.getShape().end());
    if (!readNpy(path, shape, data, why, &want))
      return errors.error({path}, why);
    if (shape != want)
      return errors.error({path}, "shape " + shapeStr(shape) + " but input '" + name +
                                      "' has shape " + shapeStr(want));
    int64_t bound = spec.refInputBounds[at];
    bool index = spec.reference.getArgument(at).getType().isIndex();
    for (size_t i = 0; i < data.size(); ++i) {
      double v = data[i];
      bool integral = v == std::floor(v);
      if ((index || bound > 0) && (!integral || v < 0 || (bound > 0 && v >= bound) ||
                                   (index && v >= (double)(1ll << 30)))) {
        return errors.error({path}, "element " + std::to_string(i) + " is " + std::to_string(v) +
                                        ", but '" + name + "' takes " +
                                        (index ? "integers in [0, 2^30)"
                                               : "integers in [0, " + std::to_string(bound) + ")"));
      }
      if (spec.refInputNonnegative[at] && v < 0) {
        return errors.error({path}, "element " + std::to_string(i) + " is " + std::to_string(v) +
                                        ", but '" + name + "' is declared nonnegative");
      }
      if (!std::isfinite(v)) {
        return errors.error({path}, "element " + std::to_string(i) + " is not finite");
      }
    }
    options.given[name] = std::move(data);
  }
  return true;
}
