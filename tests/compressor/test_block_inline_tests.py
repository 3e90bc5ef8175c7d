"""A read of a file that holds its own unit tests (Rust's ``#[cfg(test)] mod tests``, its
``#[test]`` functions named for what they check) is cut like any read: the tests are test code,
kept by neither the ranking nor the fill around what is kept, unless the question is about tests
(rule 6).  Before, a cut to a size spent its budget on the tests, whose names and bodies repeat the
question's words, and left out the code the task changes.

Real parts: real parses of a module written here.
"""

from memstrata.compressor.block import Block, BlockSettings, compress_block
from memstrata.compressor.outline import outline_of
from memstrata.compressor.tokens import count_tokens

CODE = '''\
use std::collections::VecDeque;

/// A bounded queue of pending frames.
pub struct FrameQueue {
    frames: VecDeque<Vec<u8>>,
    limit: usize,
}

impl FrameQueue {
    /// An empty queue that holds at most `limit` frames.
    pub fn new(limit: usize) -> Self {
        FrameQueue { frames: VecDeque::new(), limit }
    }

    /// Takes the oldest pending frame.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.frames.pop_front()
    }

    /// Adds a frame, refusing it once the queue holds `limit` of them.
    pub fn push(&mut self, frame: Vec<u8>) -> Result<(), Vec<u8>> {
        if self.frames.len() >= self.limit {
            return Err(frame);
        }
        self.frames.push_back(frame);
        Ok(())
    }

    /// How many frames wait.
    pub fn len(&self) -> usize {
        self.frames.len()
    }
}
'''

TESTS = ['''
#[cfg(test)]
mod tests {
    use super::*;
''']
for k in range(14):
    TESTS.append(f'''
    #[test]
    fn empty_frame_is_refused_when_full_{k}() {{
        let mut queue = FrameQueue::new({k + 1});
        for _ in 0..{k + 1} {{
            queue.push(Vec::new()).unwrap();
        }}
        let empty: Vec<u8> = Vec::new();
        assert_eq!(queue.push(empty.clone()), Err(empty));
        assert_eq!(queue.len(), {k + 1}, "an empty frame refused when the queue is full");
    }}
''')
TESTS.append("}\n")
TEXT = CODE + "".join(TESTS)
QUESTION = "queue: an empty frame must be refused when the queue is full"


def _cut(question: str, cap: int):
    code = TEXT.split("\n")
    block = Block(code, code, list(range(1, len(code) + 1)), "rust", "src/queue.rs")
    settings = BlockSettings(min_tokens=100, ranked_share=1.0, ranked_cap=cap, rel_score=0.0, fill=True,
                             min_ranked=2)
    return compress_block(block, question, settings)


def test_an_inline_test_module_and_its_tests_are_test_units():
    outline = outline_of(TEXT.split("\n"), "rust", "src/queue.rs")
    test = {u.qualname for u in outline.units if u.test}
    assert "tests" in test and "tests.empty_frame_is_refused_when_full_3" in test
    assert not {"FrameQueue", "FrameQueue.push", "FrameQueue.new"} & test


def test_a_cut_to_a_size_keeps_the_code_not_its_inline_tests():
    assert count_tokens(TEXT) > 4 * count_tokens(CODE)
    cut = _cut(QUESTION, cap=count_tokens(CODE) + 50)
    assert cut is not None
    for method in ("pub fn push(", "pub fn new(", "pub fn pop(", "pub fn len("):
        assert method in cut.text
    assert "fn empty_frame_is_refused_when_full_" not in cut.text
    assert "mod tests" not in cut.text


def test_a_question_about_tests_still_ranks_them():
    cut = _cut("test: the empty frame refused when full tests fail", cap=count_tokens(CODE) + 50)
    assert cut is not None and "fn empty_frame_is_refused_when_full_" in cut.text
