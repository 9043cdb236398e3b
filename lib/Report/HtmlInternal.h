//===- HtmlInternal.h - what the HTML pages share (internal) -----*- C++ -*-===//
//
// The verification page (Html.cpp) and the replay page (ReplayHtml.cpp): escaping,
// numbers, the style sheet, the page's head, and plan excerpts.
//
//===----------------------------------------------------------------------===//
#ifndef PLANPROOF_REPORT_HTMLINTERNAL_H
#define PLANPROOF_REPORT_HTMLINTERNAL_H

#include "Report/Report.h"

#include <string>

namespace planproof::html {

/// `raw` made printable (Report.h) and escaped for HTML text and attributes.
std::string esc(const std::string &raw);
/// A number with six significant digits.
std::string num(double v);
extern const char *const kStyle;
/// The document up to and including <body>, titled "planproof: `title`".
std::string head(const std::string &title);
/// A few lines of the source around `loc`, its line marked (data-culprit); "" when the
/// source is not at hand.
std::string excerpt(const Spec &spec, const SourceLoc &loc);

} // namespace planproof::html

#endif
