//! The control daemon inside iwarpd: the verbs socket, clients and their resources, access policy, QP placement, teardown; and iwarpctl
