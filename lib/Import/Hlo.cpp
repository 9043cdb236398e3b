//===- Hlo.cpp - XLA's text HLO, as its dumps write it -----------------------===//
#include "Import/Hlo.h"

#include <algorithm>
#include <iterator>

#include "Support/Input.h"
#include "Support/Limits.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

using namespace planproof;
using namespace planproof::hlo;

std::string Shape::str() const {
  if (isTuple()) {
    std::string s = "(";
    for (size_t i = 0; i < elements.size(); ++i)
      s += (i ? ", " : "") + elements[i].str();
    return s + ")";
  }
  std::string s = type + "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

const Instruction *Computation::root() const {
  for (auto &i : insts)
    if (i.root)
      return &i;
  return insts.empty() ? nullptr : &insts.back();
}

const Computation *Module::entry() const {
  for (auto &c : computations)
    if (c.entry)
      return &c;
  return nullptr;
}

static std::string trim(const std::string &s);

std::string planproof::hlo::reducerOpcode(const Module &m, const std::string &toApply,
                                          std::string &why) {
  std::string name = trim(toApply);
  if (!name.empty() && name[0] == '%')
    name.erase(0, 1);
  const Computation *c = m.find(name);
  if (!c) {
    why = "to_apply names an unknown computation '" + name.substr(0, 80) + "'";
    return "";
  }
  const Instruction *r = c->root();
  why = "the reduction computation '" + name.substr(0, 80) +
        "' is not one binary op of its two parameters";
  if (c->insts.size() != 3 || !r || r->operands.size() != 2 || r->shape.isTuple() ||
      !r->shape.dims.empty())
    return "";
  const Instruction *a = c->find(r->operands[0]), *b = c->find(r->operands[1]);
  if (!a || !b || a == b || a->opcode != "parameter" || b->opcode != "parameter")
    return "";
  for (const Instruction *p : {a, b})
    if (p->shape.isTuple() || !p->shape.dims.empty() || p->shape.type != r->shape.type)
      return "";
  std::string na = trim(a->rawOperands), nb = trim(b->rawOperands);
  static const char *commutative[] = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"};
  bool swaps = std::find(std::begin(commutative), std::end(commutative), r->opcode) !=
               std::end(commutative);
  if (!((na == "0" && nb == "1") || (swaps && na == "1" && nb == "0")))
    return "";
  why.clear();
  return r->opcode;
}

static std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> hlo::splitTopLevel(const std::string &text, char sep) {
  std::vector<std::string> out;
  int depth = 0;
  bool quoted = false;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      cur += c;
      if (c == '\\' && i + 1 < text.size())
        cur += text[++i];
      else if (c == '"')
        quoted = false;
      continue;
    }
    if (c == '"')
      quoted = true;
    else if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}')
      --depth;
    else if (c == sep && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!trim(cur).empty() || !out.empty())
    out.push_back(trim(cur));
  return out;
}

bool hlo::parseIntList(const std::string &text, std::vector<int64_t> &out) {
  std::string t = trim(text);
  if (!t.empty() && t.front() == '{') {
    if (t.back() != '}')
      return false;
    t = t.substr(1, t.size() - 2);
  }
  out.clear();
  if (trim(t).empty())
    return true;
  for (auto &item : splitTopLevel(t)) {
    if (item.empty())
      return false;
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (errno || *end || end == item.c_str() || v < -kMaxElements || v > kMaxElements)
      return false;
    out.push_back(v);
  }
  return true;
}

namespace {

/// Removes /*...*/ comments outside quotes (tuple shapes carry /*index=5*/).
std::string stripComments(const std::string &line) {
  std::string out;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      out += c;
      if (c == '\\' && i + 1 < line.size())
        out += line[++i];
      else if (c == '"')
        quoted = false;
      continue;
    }
    if (c == '"')
      quoted = true;
    if (c == '/' && i + 1 < line.size() && line[i + 1] == '*') {
      size_t e = line.find("*/", i + 2);
      if (e == std::string::npos)
        break;
      i = e + 1;
      continue;
    }
    out += c;
  }
  return out;
}

/// The index just past the bracket that closes the one at `open`, or npos.
size_t matchBracket(const std::string &s, size_t open) {
  int depth = 0;
  bool quoted = false;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (quoted) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        quoted = false;
      continue;
    }
    if (c == '"')
      quoted = true;
    else if (c == '(' || c == '[' || c == '{')
      ++depth;
    else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0)
        return i + 1;
    }
  }
  return std::string::npos;
}

struct Parser {
  const std::string &path;
  Diagnostic &err;
  unsigned line = 0;

  bool fail(unsigned col, const std::string &msg) {
    err.at = {path, line, col};
    err.message = msg;
    return false;
  }

  /// Parses a shape at s[pos...]; advances pos.
  bool parseShape(const std::string &s, size_t &pos, Shape &shape, int depth) {
    if (depth > 64)
      return fail(pos + 1, "tuple shapes nested too deeply");
    while (pos < s.size() && s[pos] == ' ')
      ++pos;
    if (pos < s.size() && s[pos] == '(') {
      size_t end = matchBracket(s, pos);
      if (end == std::string::npos)
        return fail(pos + 1, "unbalanced '(' in a tuple shape");
      std::string inner = s.substr(pos + 1, end - pos - 2);
      shape.type.clear();
      size_t base = pos + 1;
      if (!trim(inner).empty()) {
        size_t p = 0;
        while (true) {
          Shape el;
          if (!parseShape(inner, p, el, depth + 1)) {
            err.at.col += base;
            return false;
          }
          shape.elements.push_back(std::move(el));
          while (p < inner.size() && inner[p] == ' ')
            ++p;
          if (p >= inner.size())
            break;
          if (inner[p] != ',')
            return fail(base + p + 1, "expected ',' between tuple elements");
          ++p;
        }
      }
      pos = end;
      return true;
    }
    size_t b = pos;
    while (pos < s.size() && (std::isalnum((unsigned char)s[pos]) || s[pos] == '_'))
      ++pos;
    if (pos == b)
      return fail(b + 1, "expected a shape");
    shape.type = s.substr(b, pos - b);
    if (pos >= s.size() || s[pos] != '[')
      return fail(pos + 1, "expected '[' after the element type '" + shape.type + "'");
    size_t close = s.find(']', pos);
    if (close == std::string::npos)
      return fail(pos + 1, "unbalanced '[' in a shape");
    std::string dims = s.substr(pos + 1, close - pos - 1);
    if (dims.find('<') != std::string::npos || dims.find('?') != std::string::npos)
      return fail(pos + 1, "dynamic dimensions are not supported");
    if (!parseIntList(dims, shape.dims))
      return fail(pos + 1, "malformed dimensions '" + dims + "'");
    for (int64_t d : shape.dims)
      if (d < 0 || d > kMaxDimSize)
        return fail(pos + 1, "dimension " + std::to_string(d) + " out of range");
    if (checkedProduct(shape.dims) < 0)
      return fail(pos + 1, "shape has more than 2^40 elements");
    pos = close + 1;
    if (pos < s.size() && s[pos] == '{') {  // layout
      size_t end = matchBracket(s, pos);
      if (end == std::string::npos)
        return fail(pos + 1, "unbalanced '{' in a layout");
      pos = end;
    }
    return true;
  }

  bool parseInstruction(const std::string &raw, Instruction &inst) {
    std::string s = stripComments(raw);
    size_t pos = s.find_first_not_of(' ');
    inst.line = line;
    inst.col = pos + 1;
    if (s.compare(pos, 5, "ROOT ") == 0) {
      inst.root = true;
      pos += 5;
      while (pos < s.size() && s[pos] == ' ')
        ++pos;
    }
    size_t eq = s.find(" = ", pos);
    if (eq == std::string::npos)
      return fail(pos + 1, "expected 'NAME = SHAPE OPCODE(OPERANDS)'");
    inst.name = trim(s.substr(pos, eq - pos));
    if (!inst.name.empty() && inst.name[0] == '%')
      inst.name.erase(0, 1);
    if (inst.name.empty() || inst.name.find(' ') != std::string::npos)
      return fail(pos + 1, "malformed instruction name");
    pos = eq + 3;
    if (!parseShape(s, pos, inst.shape, 0))
      return false;
    while (pos < s.size() && s[pos] == ' ')
      ++pos;
    size_t b = pos;
    while (pos < s.size() && (std::isalnum((unsigned char)s[pos]) || s[pos] == '-' || s[pos] == '_'))
      ++pos;
    inst.opcode = s.substr(b, pos - b);
    if (inst.opcode.empty() || pos >= s.size() || s[pos] != '(')
      return fail(b + 1, "expected an opcode and '('");
    size_t close = matchBracket(s, pos);
    if (close == std::string::npos)
      return fail(pos + 1, "unbalanced '(' in the operand list");
    inst.rawOperands = s.substr(pos + 1, close - pos - 2);
    if (inst.opcode != "constant" && inst.opcode != "parameter") {
      for (auto &o : splitTopLevel(inst.rawOperands)) {
        // `%a`, `a`, or `f32[4]{0} %a` (operands printed with their shapes)
        size_t sp = o.find_last_of(' ');
        std::string n = sp == std::string::npos ? o : o.substr(sp + 1);
        if (!n.empty() && n[0] == '%')
          n.erase(0, 1);
        if (n.empty())
          return fail(pos + 1, "empty operand");
        inst.operands.push_back(n);
      }
    }
    pos = close;
    while (pos < s.size() && s[pos] == ' ')
      ++pos;
    if (pos < s.size()) {
      if (s[pos] != ',')
        return fail(pos + 1, "expected ',' before the attributes");
      for (auto &a : splitTopLevel(s.substr(pos + 1))) {
        size_t e = a.find('=');
        if (e == std::string::npos || e == 0)
          return fail(pos + 1, "malformed attribute '" + a.substr(0, 40) + "'");
        inst.attrs[trim(a.substr(0, e))] = trim(a.substr(e + 1));
      }
    }
    return true;
  }
};

/// `{key=value key="quoted value" ...}` (the metadata and source tables).
std::map<std::string, std::string> parseSpaced(const std::string &text) {
  std::map<std::string, std::string> out;
  std::string t = trim(text);
  if (t.size() >= 2 && t.front() == '{' && t.back() == '}')
    t = t.substr(1, t.size() - 2);
  size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && t[i] == ' ')
      ++i;
    size_t e = t.find('=', i);
    if (e == std::string::npos)
      break;
    std::string key = trim(t.substr(i, e - i));
    i = e + 1;
    std::string val;
    if (i < t.size() && t[i] == '"') {
      ++i;
      while (i < t.size() && t[i] != '"') {
        if (t[i] == '\\' && i + 1 < t.size())
          ++i;
        val += t[i++];
      }
      ++i;
    } else {
      while (i < t.size() && t[i] != ' ')
        val += t[i++];
    }
    out[key] = val;
  }
  return out;
}

std::string unquote(const std::string &s) {
  std::string t = trim(s);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"')
    return t.substr(1, t.size() - 2);
  return t;
}

int64_t toInt(const std::string &s, int64_t dflt = -1) {
  if (s.empty())
    return dflt;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end || v < 0 || v > kMaxElements)
    return dflt;
  return v;
}

/// The state of reading one dump line by line: the module, the computation open, and
/// the source tables met so far.
struct ModuleReader {
  Parser p;
  Module &m;
  std::map<int64_t, std::string> files, functions;
  std::map<int64_t, std::map<std::string, std::string>> locations, frames;
  std::string table;
  Computation *comp = nullptr;
  bool sawHeader = false;
  unsigned lineNo = 0;

  ModuleReader(const std::string &path, Diagnostic &err, Module &m) : p{path, err}, m(m) {}

  /// One line `raw` (p.line is its number).
  bool readLine(const std::string &raw) {
    std::string t = trim(raw);
    if (t.empty()) {
      table.clear();
      return true;
    }
    if (!sawHeader)
      return readHeader(raw, t);
    if (comp)
      return readInComputation(raw, t);
    if (t == "FileNames" || t == "FunctionNames" || t == "FileLocations" || t == "StackFrames") {
      table = t;
      return true;
    }
    if (!table.empty() && std::isdigit((unsigned char)t[0]))
      return readTableEntry(t);
    if (t.back() == '{')
      return readComputationHeader(t);
    return p.fail(1, "unexpected line outside a computation");
  }

  /// `HloModule NAME, key=value, ...` (`raw` is the line as written, `t` trimmed).
  bool readHeader(const std::string &raw, const std::string &t) {
    if (t.rfind("HloModule ", 0) != 0)
      return p.fail(1, "expected 'HloModule NAME' (a text HLO dump)");
    sawHeader = true;
    std::string rest = t.substr(10);
    size_t c = rest.find(',');
    m.name = trim(rest.substr(0, c));
    if (c == std::string::npos)
      return true;
    size_t indent = raw.find_first_not_of(" \t\r"), from = indent + 10 + c + 1;
    for (auto &a : splitTopLevel(rest.substr(c + 1))) {
      size_t e = a.find('=');
      if (e == std::string::npos)
        continue;
      std::string key = trim(a.substr(0, e)), value = trim(a.substr(e + 1));
      // The column of the value: found from where the previous attribute ended.
      size_t at = raw.find(a, from);
      unsigned col = at == std::string::npos ? 1 : unsigned(at + e + 2);
      if (at != std::string::npos)
        from = at + a.size();
      if (m.attrs.count(key))
        return p.fail(col, "header attribute '" + key + "' is given twice");
      if (key == "num_partitions" || key == "replica_count") {
        int64_t n = toInt(value, -1);
        if (value.empty() || !std::isdigit((unsigned char)value[0]) || n < 1 ||
            n > (int64_t(1) << 31))
          return p.fail(col, "malformed " + key + " '" + value.substr(0, 40) +
                                 "': a decimal integer in [1, 2^31]");
      }
      m.attrs[key] = value;
      m.attrAt[key] = {p.line, col};
    }
    return true;
  }

  /// An instruction of the open computation, or the `}` that closes it.
  bool readInComputation(const std::string &raw, const std::string &t) {
    if (t == "}") {
      if (comp->insts.empty())
        return p.fail(1, "computation '" + comp->name + "' has no instructions");
      if (!checkParameters())
        return false;
      comp = nullptr;
      return true;
    }
    Instruction inst;
    if (!p.parseInstruction(raw, inst))
      return false;
    if (inst.root)
      for (const Instruction &other : comp->insts)
        if (other.root)
          return p.fail(inst.col, "computation '" + comp->name + "' has a second ROOT ('" +
                                      other.name + "' is its root)");
    if (comp->byName.count(inst.name))
      return p.fail(inst.col, "instruction '" + inst.name + "' is defined twice");
    if (comp->insts.size() >= 10000000)
      return p.fail(1, "too many instructions");
    comp->byName[inst.name] = comp->insts.size();
    comp->insts.push_back(std::move(inst));
    return true;
  }

  /// `ID REST`, an entry of the source table being read.
  bool readTableEntry(const std::string &t) {
    size_t sp = t.find(' ');
    int64_t id = toInt(t.substr(0, sp));
    if (id < 0 || sp == std::string::npos)
      return p.fail(1, "malformed " + table + " entry");
    std::string rest = t.substr(sp + 1);
    if (table == "FileNames")
      files[id] = unquote(rest);
    else if (table == "FunctionNames")
      functions[id] = unquote(rest);
    else if (table == "FileLocations")
      locations[id] = parseSpaced(rest);
    else
      frames[id] = parseSpaced(rest);
    return true;
  }

  /// `[ENTRY] NAME ... {`, which opens a computation.
  bool readComputationHeader(const std::string &t) {
    std::string h = t;
    bool entry = false;
    if (h.rfind("ENTRY ", 0) == 0) {
      entry = true;
      h = trim(h.substr(6));
    }
    size_t e = h.find_first_of(" (");
    std::string name = h.substr(0, e);
    if (!name.empty() && name[0] == '%')
      name.erase(0, 1);
    if (name.empty())
      return p.fail(1, "malformed computation header");
    if (m.byName.count(name))
      return p.fail(1, "computation '" + name + "' is defined twice");
    m.byName[name] = m.computations.size();
    m.computations.emplace_back();
    comp = &m.computations.back();
    comp->name = name;
    comp->entry = entry;
    comp->line = lineNo;
    // The declared parameters: `(p: SHAPE, q: SHAPE)` before any `->`.
    size_t open = h.find('(', e == std::string::npos ? h.size() : e);
    if (open != std::string::npos) {
      size_t close = matchBracket(h, open);
      if (close == std::string::npos)
        return p.fail(1, "unbalanced '(' in the header of computation '" + name + "'");
      std::string inner = h.substr(open + 1, close - open - 2);
      comp->hasSignature = true;
      for (const std::string &param : splitTopLevel(inner)) {
        size_t colon = param.find(':');
        if (colon == std::string::npos)
          return p.fail(1, "malformed parameter '" + param.substr(0, 60) +
                               "' in the header of computation '" + name + "'");
        std::string text = param.substr(colon + 1);
        size_t pos = 0;
        Shape shape;
        if (!p.parseShape(text, pos, shape, 0))
          return false;
        comp->signature.push_back(shape);
      }
    }
    return true;
  }

  /// When a computation closes: its parameter instructions are exactly the parameters
  /// its header declares, one per number, of the declared shapes.
  bool checkParameters() {
    if (!comp->hasSignature)
      return true;
    std::vector<bool> seen(comp->signature.size(), false);
    for (const Instruction &inst : comp->insts) {
      if (inst.opcode != "parameter")
        continue;
      int64_t k = toInt(trim(inst.rawOperands), -1);
      p.line = inst.line;
      if (k < 0 || k >= (int64_t)seen.size())
        return p.fail(inst.col, "parameter(" + trim(inst.rawOperands).substr(0, 20) +
                                    ") of computation '" + comp->name + "', whose header declares " +
                                    std::to_string(seen.size()) + " parameters");
      if (seen[k])
        return p.fail(inst.col, "parameter " + std::to_string(k) + " of computation '" +
                                    comp->name + "' is defined twice");
      seen[k] = true;
      if (inst.shape.str() != comp->signature[k].str())
        return p.fail(inst.col, "parameter " + std::to_string(k) + " has the shape " +
                                    inst.shape.str() + ", but the header of '" + comp->name +
                                    "' declares " + comp->signature[k].str());
    }
    p.line = comp->line;
    for (size_t k = 0; k < seen.size(); ++k)
      if (!seen[k])
        return p.fail(1, "computation '" + comp->name + "' declares parameter " +
                             std::to_string(k) + " in its header but has no parameter(" +
                             std::to_string(k) + ") instruction");
    return true;
  }

  /// After the last line: the module is complete.
  bool finish() {
    if (!sawHeader) {
      p.line = 1;
      return p.fail(1, "empty file: expected a text HLO dump");
    }
    if (comp)
      return p.fail(1, "computation '" + comp->name + "' is not closed");
    if (!m.entry()) {
      p.line = lineNo;
      return p.fail(1, "the module has no ENTRY computation");
    }
    return true;
  }

  /// Source locations: metadata's stack_frame_id through the tables, or the older
  /// source_file / source_line fields.
  void resolveLocations() {
    for (auto &c : m.computations)
      for (auto &inst : c.insts) {
        auto it = inst.attrs.find("metadata");
        if (it == inst.attrs.end())
          continue;
        auto md = parseSpaced(it->second);
        inst.loc.opName = md["op_name"];
        if (md.count("source_file")) {
          inst.loc.file = md["source_file"];
          inst.loc.line = toInt(md["source_line"], 0);
          inst.loc.col = toInt(md["source_column"], 0);
        }
        int64_t frame = toInt(md["stack_frame_id"], 0);
        if (frame > 0 && frames.count(frame)) {
          int64_t locId = toInt(frames[frame]["file_location_id"], 0);
          if (locations.count(locId)) {
            auto &l = locations[locId];
            int64_t fileId = toInt(l["file_name_id"], 0);
            if (files.count(fileId)) {
              inst.loc.file = files[fileId];
              inst.loc.line = toInt(l["line"], 0);
              inst.loc.col = toInt(l["column"], 0);
            }
          }
        }
      }
  }
};

} // namespace

/// `text` with its comments blanked (newlines kept, so lines and columns stay): `//`
/// to the end of the line and `/* ... */`, outside double-quoted strings. An
/// unterminated block comment is an error at its start.
static bool blankComments(std::string &text, Parser &p) {
  unsigned line = 1, col = 1;
  for (size_t i = 0; i < text.size(); ++i, ++col) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      col = 0;
    } else if (c == '"') {
      for (++i, ++col; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i, ++col)
        if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] != '\n')
          ++i, ++col;
      if (i < text.size() && text[i] == '\n')
        --i, --col; // (the newline is counted above)
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      for (; i < text.size() && text[i] != '\n'; ++i)
        text[i] = ' ';
      --i, --col;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      if (end == std::string::npos) {
        p.line = line;
        return p.fail(col, "unterminated '/*' comment");
      }
      for (; i < end + 2; ++i)
        if (text[i] != '\n')
          text[i] = ' ';
        else
          ++line, col = 0;
      --i;
    }
  }
  return true;
}

bool hlo::parseModule(const std::string &path, const std::string &original, Module &m,
                      Diagnostic &err) {
  ModuleReader r(path, err, m);
  m.path = path;
  if (std::optional<Diagnostic> bad = utf8Problem(path, original)) {
    err = *bad;
    return false;
  }
  std::string text = original;
  if (!blankComments(text, r.p))
    return false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    std::string raw = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? text.size() + 1 : nl + 1;
    r.p.line = ++r.lineNo;
    if (!r.readLine(raw))
      return false;
  }
  if (!r.finish())
    return false;
  r.resolveLocations();
  return true;
}
