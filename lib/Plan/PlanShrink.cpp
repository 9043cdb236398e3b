//===- PlanShrink.cpp - a recipe's configuration made small, its edits carried over ===//
//
// At production sizes no counterexample is computed: the layout engine proves what it
// can and says where a plan departs (docs/layout-engine.md), the element engine would
// have to run every rank on every element. `planproof shrink` looks for the same bug
// where the element engine can show it: the recipe's model and parallelism at reduced
// sizes with smaller degrees, layers and microbatches, and the recipe's edits carried
// over to that plan. This file holds the two pieces that need no engine: the smaller
// configurations, smallest first, and the translation of the edits. The search that
// runs the engines is tools/planproof/CmdShrink.cpp.
//
// The translation assumes that the generator writes the ops of a layer, a stage or a
// microbatch the same way whatever the configuration, with the index in the value's
// name and the sizes in the types (lib/Plan/PlanGen.cpp): an edit's text with its
// numbers as holes finds the same op in the smaller plan. That assumption is not a
// proof -- the smaller plan is another plan -- which is why the search checks what it
// relies on: the smaller plan without the edits verifies, with them it is violated,
// and its counterexample is run concretely (CmdShrink.cpp). The production plan's
// verdict is not changed by what is found here.
//
//===----------------------------------------------------------------------===//
#include "Plan/PlanGen.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

namespace planproof::plangen {

namespace {

/// At most this many occurrences of a pattern are looked at, and a replace_all carries
/// over to at most kDistinctLimit distinct texts (each a pass over the plan).
constexpr size_t kAllLimit = 1 << 16, kDistinctLimit = 256;

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdent(char c) {
  return std::isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.' || c == '-';
}

/// A text with each run of digits a hole: lits.size() == nums.size() + 1. A hole that
/// ends a value's name after an underscore (`%acc_l0_wq_2`) is `optional`: the
/// underscore moves into the hole, which matches `_N` or nothing -- the suffix MLIR's
/// printer adds to tell apart values of the same name, whose number depends on how
/// many there are (the third microbatch's accumulator is `%acc_wq_0` with three
/// microbatches and `%acc_wq` with two).
struct Pattern {
  std::vector<std::string> lits, nums;
  std::vector<bool> optional;
};

/// Whether the digits at [b, e) of `s` end a value's name after an underscore.
bool nameSuffix(const std::string &s, size_t b, size_t e) {
  if (b < 2 || s[b - 1] != '_' || (e < s.size() && isIdent(s[e])))
    return false;
  size_t k = b - 1;
  while (k > 0 && isIdent(s[k - 1]))
    --k;
  return k > 0 && s[k - 1] == '%' && k < b - 1;
}

Pattern toPattern(const std::string &s) {
  Pattern p;
  p.lits.emplace_back();
  for (size_t i = 0; i < s.size();) {
    if (!isDigit(s[i])) {
      p.lits.back() += s[i++];
      continue;
    }
    size_t j = i;
    while (j < s.size() && isDigit(s[j]))
      ++j;
    bool opt = nameSuffix(s, i, j);
    if (opt)
      p.lits.back().pop_back(); // the underscore is the hole's
    p.nums.push_back(s.substr(i, j - i));
    p.optional.push_back(opt);
    p.lits.emplace_back();
    i = j;
  }
  return p;
}

struct Match {
  size_t begin = 0, end = 0;
  std::vector<std::string> caps; // "" for an optional hole that matched nothing
};

/// Matches `p` in `text` from `pos`, where lits[0] has matched and hole 0 starts.
bool matchFrom(const std::string &text, const Pattern &p, size_t begin, size_t pos,
               Match &m) {
  m.begin = begin;
  m.caps.clear();
  for (size_t i = 0; i < p.nums.size(); ++i) {
    bool absent = false;
    if (p.optional[i]) {
      if (pos + 1 < text.size() && text[pos] == '_' && isDigit(text[pos + 1]))
        ++pos;
      else if (pos < text.size() && isIdent(text[pos]))
        return false; // another name that goes on
      else
        absent = true;
    }
    size_t j = pos;
    while (j < text.size() && isDigit(text[j]))
      ++j;
    if (j == pos && !absent)
      return false;
    m.caps.push_back(text.substr(pos, j - pos));
    pos = j;
    const std::string &lit = p.lits[i + 1];
    if (text.compare(pos, lit.size(), lit) != 0)
      return false;
    pos += lit.size();
  }
  m.end = pos;
  return true;
}

/// Every occurrence of `p` in `text` (at most `limit`).
std::vector<Match> findMatches(const std::string &text, const Pattern &p, size_t limit) {
  std::vector<Match> out;
  const std::string &first = p.lits[0];
  if (first.empty()) {
    // The pattern starts with a number: anchor on the literal after it.
    if (p.nums.empty() || p.lits[1].empty())
      return out; // nothing but digits: no anchor (the edit is not translated)
    const std::string &anchor = p.lits[1];
    Pattern rest = p; // the pattern after its first number
    rest.lits.erase(rest.lits.begin());
    rest.nums.erase(rest.nums.begin());
    rest.optional.erase(rest.optional.begin());
    for (size_t at = text.find(anchor); at != std::string::npos && out.size() < limit;
         at = text.find(anchor, at + 1)) {
      size_t b = at;
      while (b > 0 && isDigit(text[b - 1]))
        --b;
      if (b == at)
        continue;
      Match m;
      if (matchFrom(text, rest, b, at + anchor.size(), m)) {
        m.caps.insert(m.caps.begin(), text.substr(b, at - b));
        out.push_back(std::move(m));
      }
    }
    return out;
  }
  for (size_t at = text.find(first); at != std::string::npos && out.size() < limit;
       at = text.find(first, at + 1)) {
    Match m;
    if (matchFrom(text, p, at, at + first.size(), m))
      out.push_back(std::move(m));
  }
  return out;
}

/// The numbers matched so far: the edit's number -> the smaller plan's.
using NumberMap = std::map<std::string, std::string>;

/// The occurrence whose numbers agree best with the pattern's own and with `sigma`.
const Match *best(const std::vector<Match> &ms, const Pattern &p, const NumberMap &sigma) {
  const Match *chosen = nullptr;
  int top = 0;
  for (const Match &m : ms) {
    int score = 0;
    for (size_t i = 0; i < p.nums.size(); ++i) {
      score += m.caps[i] == p.nums[i];
      if (auto it = sigma.find(p.nums[i]); it != sigma.end())
        score += it->second == m.caps[i] ? 2 : -2;
    }
    if (!chosen || score > top)
      chosen = &m, top = score;
  }
  return chosen;
}

/// `to` with each number that the pattern holds replaced by what its hole matched
/// (where the number is in several holes that matched differently, the k-th use of
/// the number takes the k-th hole); other numbers stay.
std::string carryOver(const std::string &to, const Pattern &p, const Match &m) {
  Pattern t = toPattern(to);
  std::map<std::string, int> uses;
  std::string out = t.lits[0];
  for (size_t i = 0; i < t.nums.size(); ++i) {
    const std::string &n = t.nums[i];
    std::vector<size_t> holes;
    for (size_t j = 0; j < p.nums.size(); ++j)
      if (p.nums[j] == n)
        holes.push_back(j);
    int k = uses[n]++;
    if (holes.empty()) {
      out += n;
    } else {
      size_t h = holes[std::min<size_t>(k, holes.size() - 1)];
      if (!m.caps[h].empty())
        out += (t.optional[i] ? "_" : "") + m.caps[h];
      else if (!t.optional[i])
        out += n; // the number is no name's suffix here: kept
    }
    out += t.lits[i + 1];
  }
  return out;
}

void remember(NumberMap &sigma, const Pattern &p, const Match &m) {
  for (size_t i = 0; i < p.nums.size(); ++i)
    sigma.emplace(p.nums[i], m.caps[i]);
}

/// The occurrence of `s` in `text` chosen as above; false when there is none.
bool locate(const std::string &text, const std::string &s, NumberMap &sigma, Pattern &p,
            Match &m) {
  p = toPattern(s);
  std::vector<Match> ms = findMatches(text, p, kAllLimit);
  const Match *b = best(ms, p, sigma);
  if (!b)
    return false;
  m = *b;
  remember(sigma, p, m);
  return true;
}

/// Ascending divisors of `d` that are at least 2, at most `n` of them; {1} for 1.
std::vector<int64_t> smallDegrees(int64_t d, size_t n) {
  if (d <= 1)
    return {1};
  std::vector<int64_t> out;
  for (int64_t k = 2; k <= d && out.size() < n; ++k)
    if (d % k == 0)
      out.push_back(k);
  return out;
}

} // namespace

bool translateEdits(const std::vector<Edit> &edits, const std::string &at,
                    const std::string &text, Translation &out, std::string &why) {
  out = Translation();
  out.text = text;
  NumberMap sigma;
  for (size_t i = 0; i < edits.size(); ++i) {
    const Edit &e = edits[i];
    std::string where = "edits[" + std::to_string(i) + "]: ";
    Pattern p;
    Match m;
    if (!locate(out.text, e.from, sigma, p, m))
      return (why = where + "no counterpart of '" + e.from + "'", false);
    std::vector<Edit> made;
    if (e.kind == Edit::Replace) {
      made.push_back({Edit::Replace, out.text.substr(m.begin, m.end - m.begin),
                      carryOver(e.to, p, m)});
    } else if (e.kind == Edit::ReplaceAll) {
      std::set<std::string> seen;
      for (const Match &each : findMatches(out.text, p, kAllLimit)) {
        std::string from = out.text.substr(each.begin, each.end - each.begin);
        if (seen.insert(from).second)
          made.push_back({Edit::ReplaceAll, from, carryOver(e.to, p, each)});
        // Each distinct text is one pass over the plan: bounded.
        if (made.size() > kDistinctLimit)
          return (why = where + "more than " + std::to_string(kDistinctLimit) +
                        " distinct counterparts of '" + e.from + "'",
                  false);
      }
    } else {
      Pattern q;
      Match n;
      if (!locate(out.text, e.to, sigma, q, n))
        return (why = where + "no counterpart of '" + e.to + "'", false);
      made.push_back({Edit::MoveLine, out.text.substr(m.begin, m.end - m.begin),
                      out.text.substr(n.begin, n.end - n.begin)});
    }
    for (const Edit &x : made) {
      std::string err;
      if (!applyEdit(x, out.text, err))
        return (why = where + err, false);
      out.edits.push_back(x);
    }
  }
  if (!at.empty()) {
    Pattern p;
    Match m;
    if (!locate(out.text, at + " = ", sigma, p, m))
      return (why = "expect.at: no counterpart of '" + at + "'", false);
    out.at = out.text.substr(m.begin, m.end - m.begin - 3);
  }
  return true;
}

std::vector<Parallel> smallerConfigurations(const Model &m, const Parallel &big, size_t limit) {
  Parallel base = big;
  base.fullSize = false;
  base.seq = 0;
  int64_t bigV = big.pp > 1 && big.schedule == "interleaved" ? (big.chunks ? big.chunks : 2) : 1;
  int64_t bigLayers = big.layers     ? big.layers
                      : big.fullSize ? m.layers
                      : big.pp > 1   ? big.pp * bigV
                                     : std::min<int64_t>(m.layers, 2);
  std::vector<Parallel> all;
  for (int64_t dp : smallDegrees(big.dp, 3))
    for (int64_t tp : smallDegrees(big.tp, 3))
      for (int64_t pp : smallDegrees(big.pp, 3))
        for (int64_t ep : smallDegrees(big.ep, 2))
          for (int64_t cp : smallDegrees(big.cp, 3)) {
            int64_t v = pp > 1 && big.schedule == "interleaved" ? (big.chunks ? big.chunks : 2) : 1;
            int64_t lmin = std::max<int64_t>(1, pp * v);
            std::set<int64_t> layers = {lmin, lmin + 1, 2 * lmin};
            std::set<int64_t> mbs = {1, 2, std::max<int64_t>(2, pp), 2 * pp};
            for (int64_t l : layers)
              for (int64_t mb : mbs) {
                if (l > std::min<int64_t>(bigLayers, 16) || mb > big.microbatches)
                  continue;
                if (v > 1 && mb % pp != 0)
                  continue;
                Parallel p = base;
                std::tie(p.dp, p.tp, p.pp, p.ep, p.cp) = std::tie(dp, tp, pp, ep, cp);
                p.layers = l;
                p.microbatches = mb;
                all.push_back(p);
              }
          }
  auto cost = [](const Parallel &p) {
    return p.dp * p.tp * p.pp * p.ep * p.cp * p.layers * p.microbatches;
  };
  std::stable_sort(all.begin(), all.end(), [&](const Parallel &a, const Parallel &b) {
    return cost(a) < cost(b);
  });
  if (all.size() > limit)
    all.resize(limit);
  return all;
}

} // namespace planproof::plangen
