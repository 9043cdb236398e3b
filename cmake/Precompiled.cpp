// The translation unit that builds cmake/Precompiled.h's precompiled header (see
// cmake/PlanproofPch.cmake); it has no code of its own.
