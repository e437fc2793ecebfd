"""eosconnect.runtime"""
