mod crafted;
mod data;
mod mem_ops;
mod order;
mod pair;
mod states;
