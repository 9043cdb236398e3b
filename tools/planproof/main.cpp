//===- main.cpp - the planproof executable ----------------------*- C++ -*-===//
#include "Cli.h"

int main(int argc, char **argv) { return planproof::cliMain(argc, argv, /*watchdog=*/true); }
