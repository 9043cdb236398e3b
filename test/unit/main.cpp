//===- main.cpp - Catch2 entry point for planproof's unit tests -------------===//
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
