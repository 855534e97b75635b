#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Calls in devnsd go down (docs/ARCHITECTURE.md, "Layers").

Usage: check-calls.py [SRC_DEVNSD]   (default: src/devnsd beside this tests/)

Reads every .c file of devnsd and finds which of them uses a function
another one defines (calls it, or hands it on as a callback). It fails,
naming the files and the functions, where

- files of one folder use each other's functions in a circle, two files
  both ways or more round a ring (inside a folder, news goes up through
  listeners and ops tables, not calls);
- a folder uses a function of a folder above it in the layer order below,
  or two folders of the same layer use each other's functions.

Functions are those defined at the start of a line and not static;
comments, strings and character constants are left out before looking.
"""

import os
import re
import sys

# Top to bottom. A folder may use the functions of the folders below its layer.
LAYERS = [
	['main'],  # devnsd.c, at the top of src/devnsd
	['bus'],
	['input', 'display', 'leds'],
	['populate'],
	['restart'],
	['core'],
	['conf', 'watch'],
]
RANK = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}

# Comments go, strings and character constants are left empty: a "//" in a
# string is no comment, and a name in a comment is no call.
TOKENS = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)

# A definition: at the start of a line, not static, a name, its parameters
# (over several lines, perhaps) and the opening brace.
DEFINITION = re.compile(r'^(?!static\b)[A-Za-z_][^;{}()#]*?\b([A-Za-z_]\w*)\s*\([^;{}]*?\)\s*\{', re.M)


def strip(text):
	return TOKENS.sub(lambda m: '""' if m.group(0)[0] == '"' else "''" if m.group(0)[0] == "'" else ' ', text)


def read_sources(root):
	"""{path relative to root: text without comments and strings}."""
	sources = {}
	for directory, _, names in os.walk(root):
		for name in names:
			if name.endswith('.c'):
				path = os.path.join(directory, name)
				with open(path, encoding='utf-8') as f:
					sources[os.path.relpath(path, root)] = strip(f.read())
	return sources


def folder_of(path):
	head = os.path.dirname(path)
	return head.split(os.sep)[0] if head else 'main'


def uses(sources):
	"""{(user, definer): [function, ...]} between different files."""
	defined = {}
	for path, text in sorted(sources.items()):
		for m in DEFINITION.finditer(text):
			defined.setdefault(m.group(1), path)
	words = {path: set(re.findall(r'\b[A-Za-z_]\w*\b', text)) for path, text in sources.items()}
	found = {}
	for path in sorted(sources):
		for function, definer in defined.items():
			if definer != path and function in words[path]:
				found.setdefault((path, definer), []).append(function)
	return found


def circle(edges, start):
	"""A shortest path of files from start back to start, or None."""
	paths = {start: [start]}
	todo = [start]
	while todo:
		here = todo.pop(0)
		for there in sorted(edges.get(here, ())):
			if there == start:
				return paths[here] + [start]
			if there not in paths:
				paths[there] = paths[here] + [there]
				todo.append(there)
	return None


def circles(found):
	"""Inside each folder: the shortest circle through each file that is on one, each circle once."""
	edges = {}
	for user, definer in found:
		if folder_of(user) == folder_of(definer):
			edges.setdefault(user, set()).add(definer)
	reported = set()
	for start in sorted(edges):
		path = circle(edges, start)
		if not path or frozenset(path) in reported:
			continue
		reported.add(frozenset(path))
		steps = [f'{a} uses {", ".join(sorted(found[(a, b)]))} of {b}' for a, b in zip(path, path[1:])]
		yield f'{" -> ".join(path)} call round in a circle: ' + '; '.join(steps)


def across(found):
	"""Between folders: calls up the layers, and folders of one layer that call each other."""
	for (user, definer), functions in sorted(found.items()):
		a, b = folder_of(user), folder_of(definer)
		if a == b:
			continue
		if a not in RANK or b not in RANK:
			yield f'{a if a not in RANK else b}/ is in no layer: add it to LAYERS in check-calls.py'
		elif RANK[b] < RANK[a]:
			yield f'{user} calls up into {b}/: {definer}\'s {", ".join(sorted(functions))}'
		elif RANK[b] == RANK[a] and a < b:
			back = sorted((u, d) for (u, d) in found if folder_of(u) == b and folder_of(d) == a)
			if back:
				u, d = back[0]
				yield (f'{a}/ and {b}/ call each other: {user} uses {definer}\'s {", ".join(sorted(functions))}; '
				       f'{u} uses {d}\'s {", ".join(sorted(found[(u, d)]))}')


def main():
	here = os.path.dirname(os.path.abspath(__file__))
	root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', 'src', 'devnsd')
	sources = read_sources(root)
	if not sources:
		print(f'{root}: no .c files', file=sys.stderr)
		return 1
	found = uses(sources)
	bad = list(circles(found)) + sorted(set(across(found)))
	for line in bad:
		print(line)
	if bad:
		return 1
	print(f'{len(sources)} files: calls go down')
	return 0


if __name__ == '__main__':
	sys.exit(main())
